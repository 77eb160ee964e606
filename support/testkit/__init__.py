"""The test kit: what tests build and check without starting anything. Object builders
(``objects``), Kargo's status shapes (``kargo_shapes``), waits (``waits``), the fake API
(``fakeapi``), the suites' invariants (``invariants``), AdmissionReviews (``reviews``) and
small local servers (``plugin_server``, ``prometheus_stub``), the real webhook server on
loopback (``webhook_server``) and a free port (``net``)."""
