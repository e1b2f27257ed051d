"""dlbench reports: plots, report.html/report.md and comparisons, read from result records only."""
