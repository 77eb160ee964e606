"""Release tooling (``make release``): what ships a version of rollgate, apart from the
harness that runs clusters and processes (docs/install.md "Releases")."""
