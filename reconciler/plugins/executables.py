"""Is a downloaded plugin a Linux executable Argo Rollouts can run? (pure)

Argo Rollouts starts a plugin as a process (hashicorp/go-plugin) on the node its pod runs
on: a file that is not an ELF executable for that node's architecture (an HTML error
page saved as the binary, a macOS or Windows build, the arm64 build on amd64 nodes)
downloads and matches its digest, and then fails only when a Rollout or an AnalysisRun
first uses it. The pre-flight reads the first bytes of every download and refuses such a
file before anything is written, naming what it is instead.
"""

from __future__ import annotations

import platform

# e_machine of the architectures Argo Rollouts publishes images for.
MACHINES = {"amd64": 62, "arm64": 183}
_NAMES = {62: "x86-64 (amd64)", 183: "AArch64 (arm64)", 3: "i386", 40: "ARM (32-bit)",
          243: "RISC-V", 21: "PowerPC 64", 22: "S/390"}
HEADER_BYTES = 20  # e_ident (16) + e_type (2) + e_machine (2)
_FOREIGN = ((b"\xcf\xfa\xed\xfe", "a macOS (Mach-O) binary"),
            (b"\xca\xfe\xba\xbe", "a macOS (Mach-O) universal binary"),
            (b"MZ", "a Windows (PE) binary"),
            (b"#!", "a script, not a binary"),
            (b"PK\x03\x04", "a zip archive"),
            (b"\x1f\x8b", "a gzip archive"))


def host_arch() -> str:
    """The architecture this process runs on, as Kubernetes names it (amd64, arm64)."""
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def problem(head: bytes, *, arch: str) -> str | None:
    """Why ``head`` (a file's first bytes) is not a Linux executable for ``arch``, or None."""
    if head[:4] != b"\x7fELF":
        return _not_elf(head)
    if len(head) < HEADER_BYTES:
        return f"a truncated ELF file ({len(head)} bytes)"
    if head[4] != 2:
        return "a 32-bit ELF file; Argo Rollouts needs a 64-bit Linux executable"
    if head[5] != 1:
        return "a big-endian ELF file"
    kind = int.from_bytes(head[16:18], "little")
    if kind not in (2, 3):  # ET_EXEC, ET_DYN (a position-independent executable)
        return "an ELF file that is not an executable (an object file or a core dump)"
    machine = int.from_bytes(head[18:20], "little")
    want = MACHINES.get(arch)
    if want is not None and machine != want:
        found = _NAMES.get(machine, f"machine {machine}")
        return f"an ELF executable for {found}, not {arch}"
    return None


def _not_elf(head: bytes) -> str:
    for magic, what in _FOREIGN:
        if head.startswith(magic):
            return f"not a Linux executable: {what}"
    text = head.lstrip()[:1]
    if text == b"<":
        return "not a Linux executable: it starts like HTML or XML (an error page?)"
    return f"not a Linux executable (it starts with bytes {head[:8].hex() or 'none'})"
