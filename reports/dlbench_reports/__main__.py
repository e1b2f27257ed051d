"""`python -m dlbench_reports report DIR` | `micro DIR` | `compare DIR...` | `triage DIR` |
`check-mllog FILE`."""
from __future__ import annotations

import argparse
import sys

from .records import RecordError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench", description="dlbench reports")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="plots, report.md and report.html for a results dir")
    rep.add_argument("directory")
    mic = sub.add_parser("micro", help="tables and plots of a micro suite's results dir")
    mic.add_argument("directory")
    cmp_ = sub.add_parser("compare", help="systems side by side (MLPerf-style)")
    cmp_.add_argument("directories", nargs="+")
    cmp_.add_argument("--references", action="store_true",
                      help="add the published rows of reports/references.json")
    cmp_.add_argument("--references-file", help="add the published rows of this file instead")
    cmp_.add_argument("--out", help="also write the comparison as Markdown here")
    tri = sub.add_parser("triage", help="the device check's triage table (triage.md) of a folder")
    tri.add_argument("directory")
    chk = sub.add_parser("check-mllog", help="run the MLCommons compliance checker on a log")
    chk.add_argument("file")
    args = parser.parse_args(argv)
    try:
        if args.command == "report":
            from .report import build
            r = build(args.directory)
            for note in r.skipped:
                print(f"report: skipped {note}")
            print(f"report: {r.markdown}, {r.html}; {len(r.plots)} plots in "
                  f"{r.directory / 'plots'}")
            return 0
        if args.command == "micro":
            from .micro import main as micro_main
            return micro_main(args.directory)
        if args.command == "compare":
            from .compare import main as compare_main
            refs = args.references_file or ("default" if args.references else None)
            return compare_main(args.directories, refs, args.out)
        if args.command == "triage":
            from .triage import main as triage_main
            return triage_main(args.directory)
        if args.command == "check-mllog":
            from .mllog_check import main as check_main
            return check_main(args.file)
    except RecordError as e:  # one line, whatever the input put in the message
        print(f"dlbench: error: {' '.join(str(e).splitlines())}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
