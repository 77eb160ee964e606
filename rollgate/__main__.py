"""``rollgate COMMAND ...``: dispatch to the program that does the work.

    rollgate validate|migrate ...   offline checks and the spec.analysis rewrite (schemas)
    rollgate certs generate|bundle|inject ...
    rollgate webhook ...            the admission webhook (gunicorn over TLS)
    rollgate reconciler ...         Stage verification and RolloutManager plugins
    rollgate explain stage NAME -n NS [-o json]
    rollgate selftest [-n NS]       dry runs a live cluster's admission (helm test)

Installed as ``rollgate`` and as ``kubectl-rollgate``, so ``kubectl rollgate explain
stage NAME`` works once the venv's ``bin`` is on PATH. The ``python -m schemas|certs|
webhook|reconciler`` forms keep working; they are the same functions.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

Main = Callable[[list[str], str], int]


def _schemas(command: str) -> Main:
    def run(argv: list[str], prog: str) -> int:
        from schemas.cli.main import main

        # schemas' parser has the sub-command, so ``prog`` is the bare command.
        return main([command, *argv], prog=prog.rsplit(" ", 1)[0])

    return run


def _certs(argv: list[str], prog: str) -> int:
    from certs.__main__ import main

    return main(argv, prog=prog)


def _webhook(argv: list[str], prog: str) -> int:
    from webhook.__main__ import main

    return main(argv, prog=prog)


def _reconciler(argv: list[str], prog: str) -> int:
    from reconciler.cli import main

    return main(argv, prog=prog)


def _selftest(argv: list[str], prog: str) -> int:
    from webhook.selftest_command import main

    return main(argv, prog=prog)


def _explain(argv: list[str], prog: str) -> int:
    from reconciler.explain_command import main

    return main(argv, prog=prog)


COMMANDS: dict[str, tuple[Main, str]] = {
    "validate": (_schemas("validate"), "check Stage and RolloutManager manifests offline"),
    "migrate": (_schemas("migrate"), "rewrite spec.analysis as spec.verification"),
    "certs": (_certs, "generate, bundle or inject the webhook's certificates"),
    "webhook": (_webhook, "serve the admission webhook"),
    "reconciler": (_reconciler, "run the reconciler"),
    "explain": (_explain, "the verification of a Stage's current freight, as a timeline"),
    "selftest": (_selftest, "prove rollgate's webhooks deny and allow in a live cluster"),
}


def usage(name: str) -> str:
    """The top-level help: the commands and what each does."""
    width = max(len(c) for c in COMMANDS)
    lines = [f"usage: {name} COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {c.ljust(width)}  {text}" for c, (_, text) in COMMANDS.items()]
    lines += ["", f"`{name} COMMAND --help` describes a command's options."]
    return "\n".join(lines)


def program_name(argv0: str) -> str:
    """``rollgate``, or ``kubectl rollgate`` when kubectl started us as its plugin."""
    base = os.path.basename(argv0)
    return "kubectl rollgate" if base.startswith("kubectl-") else "rollgate"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    name = program_name(sys.argv[0])
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage(name))
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        import difflib

        close = difflib.get_close_matches(command, list(COMMANDS), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        print(f"{name}: unknown command {command!r}{hint}\n\n{usage(name)}", file=sys.stderr)
        return 2
    run, _ = COMMANDS[command]
    return run(rest, f"{name} {command}")


if __name__ == "__main__":
    sys.exit(main())
