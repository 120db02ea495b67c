"""The program process's cyclic garbage collection: thresholds for a short-lived process that
builds a large heap and keeps all of it until it ends.

A stack keeps every Output and future alive until the program ends; with Python's default
thresholds the cyclic GC rescans that growing heap again and again, which made program evaluation
super-linear: 5.3 ms per resource at 4,504 resources, 3.1 ms with these thresholds and 2.5 ms with
no collection at all (bench/program_eval.py). The program's imports are the same kind of work:
pydantic building the stack kinds' models and every module's classes and functions, none of it
garbage; collections during them cost every `preview` and `up` ~26 ms (bench/program_import.py:
`import tfk8s.program` 123.8 -> 97.3 ms, 2026-11-26).
So the entry point (infra/__main__.py, tfk8s.entry.boot) sets these thresholds first, before the
program's imports. Standard library only, for that reason.
"""

from __future__ import annotations

import gc

EVALUATION_GC_THRESHOLDS = (100_000, 50, 100)


def use_evaluation_thresholds() -> None:
    gc.set_threshold(*EVALUATION_GC_THRESHOLDS)
