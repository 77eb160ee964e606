"""The upstream controllers rollgate runs next to, as the harness starts them: the real
Kargo (``kargo``), Argo Rollouts (``rollouts``), argo-rollouts-manager (``operator``) and
cert-manager (``cert_manager``); ``trees`` finds the source trees two of them are built from."""
