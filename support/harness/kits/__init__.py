"""Compositions of the harness that the test suites and the benchmarks share: a plane with
rollgate on it (``plane``), Kargo Projects (``kargo``), verification set-ups (``verification``),
fault drivers (``faults``) and the webhook under attack (``chaos``)."""
