"""One module per plot. Each `render(...)` returns the matplotlib Figure, or None when the results
hold nothing to plot; `save` writes it as PNG and SVG."""
