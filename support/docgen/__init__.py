"""The generated reference pages, each written from the code it describes so it cannot
drift from it, and checked by a test: the chart README's values table
(``chart_values``), docs/flags.md (``flags``) and docs/metrics.md (``metrics``, with the
condition and Event reasons ``reasons`` finds in the product's source); ``cli`` is their
one command line. Nothing here starts a process or reaches a cluster."""
