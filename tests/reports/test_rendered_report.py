"""The scaling report as a reader's browser shows it (Debian's chromium, headless), at a desktop's
width and a narrow window's: every image loads, none reaches past the page's right edge, each sits
in a figure with a caption under it, and every row of the summary is one line high."""
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dlbench_reports.report import build

# Run once the page has loaded: what the test judges, written where --dump-dom shows it.
CHECK = """<script>
window.addEventListener('load', () => {
  const page = document.documentElement.clientWidth;
  const images = [...document.images];
  const src = i => i.getAttribute('src');
  const caption = i => {
    const figure = i.closest('figure');
    const c = figure && figure.querySelector('figcaption');
    return c ? c.textContent.trim() : '';
  };
  // A row taller than a line and a half of its text (and its cells' padding) has wrapped.
  const rows = [...document.querySelectorAll('table.summary tr')].slice(1)
    .map(r => r.getBoundingClientRect().height);
  const cell = document.querySelector('table.summary td');
  const line = cell ? 1.25 * parseFloat(getComputedStyle(cell).fontSize) : 0;
  document.body.setAttribute('data-check', JSON.stringify({
    page, images: images.length,
    rows: rows.length, tall: rows.filter(h => h > 1.5 * line + 8).length,
    wide: images.filter(i => i.getBoundingClientRect().right > page).map(src),
    unloaded: images.filter(i => !i.complete || i.naturalWidth === 0).map(src),
    uncaptioned: images.filter(i => !caption(i)).map(src)}));
});
</script>"""


def rendered(report: Path, width: int, tmp_path: Path) -> dict:
    """What CHECK found in `report` (an HTML file) at a window `width` pixels wide."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing: scripts/install-deps.sh installs Debian's chromium"
    page = report.with_name("checked.html")
    page.write_text(report.read_text().replace("</body>", CHECK + "</body>"))
    env = dict(os.environ, HOME=str(tmp_path))  # its profile, not the user's
    out = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         f"--window-size={width},900",
         "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180, env=env)
    found = re.search(r'data-check="([^"]*)"', out.stdout)
    assert found, f"chromium showed no result (exit {out.returncode}): {out.stderr[-1500:]}"
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.parametrize("width", [1280, 800])
def test_the_scaling_report_fits_the_page_and_captions_every_figure(results, tmp_path, width):
    report = build(results("scaling"))
    check = rendered(report.html, width, tmp_path)
    assert check["images"] == len(report.plots) > 0, check
    assert check["unloaded"] == [], check
    assert check["wide"] == [], check
    assert check["uncaptioned"] == [], check
    # Every summary row one line high: none squeezed into a column of wrapped words.
    assert check["rows"] == len(report_rows(report)) and check["tall"] == 0, check


def report_rows(report) -> list:
    return [line for line in report.html.read_text().splitlines() if line.startswith("<tr id=")]


def test_the_check_sees_a_wide_image_and_a_wrapped_row(results, tmp_path):
    # The same report with its images' width no longer bounded by the page's, and its rows free
    # to wrap: the check must say so, or it proves nothing above.
    report = build(results("scaling"))
    page = report.html.read_text()
    report.html.write_text(page.replace("img{max-width:100%;", "img{")
                           .replace(".summary td{white-space:nowrap}", ""))
    check = rendered(report.html, 800, tmp_path)
    assert check["wide"] and check["tall"], check
