"""Check that the built site documents every public name: ``python docs/_ext/check_api.py SITE_DIR``.

The public names are each dpkit package's ``__all__`` and the ``__all__`` of every module that a page under
``docs/api/`` documents with a ``::: module`` directive (``dpkit.mechanisms.contract``, ``dpkit.audit.testing``,
...). Each must appear in the site's ``objects.inv`` (written by mkdocstrings) under that package or module;
the top-level ``dpkit`` re-exports must be documented somewhere. Exit status 1 lists what is missing, so a new
public name without a place in the API reference fails ``make test``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def inventory(site: Path) -> set[str]:
    raw = (site / "objects.inv").read_bytes()
    body = zlib.decompress(raw.split(b"\n", 4)[4]).decode()
    return {line.split(" ", 1)[0] for line in body.splitlines() if line.strip()}


def main(site: str) -> int:
    names = inventory(Path(site))
    import dpkit

    packages = {f"dpkit.{m.name}" for m in pkgutil.iter_modules(dpkit.__path__)
                if m.ispkg and not m.name.startswith("_")}
    documented: set[str] = set()
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        documented |= set(re.findall(r"^::: (dpkit[\w.]*)\s*$", text, flags=re.MULTILINE))
    documented.discard("dpkit")
    missing = [f"{p} (no ::: {p} directive in docs/api/)" for p in sorted(packages - documented)]
    modules = packages | documented
    for modname in sorted(modules):
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", ()):
            if f"{modname}.{name}" not in names:
                missing.append(f"{modname}.{name}")
    homes = {n.rsplit(".", 1)[-1] for n in names if n.count(".") >= 2}
    for name in dpkit.__all__:
        if name.startswith("__") or f"dpkit.{name}" in modules:
            continue
        if name not in homes:
            missing.append(f"dpkit.{name} (re-exported by dpkit, documented nowhere)")
    if missing:
        print("public names missing from the API reference (docs/api/*.md):", *missing, sep="\n  ")
        return 1
    print(f"API reference: {len(modules)} modules, every public name documented")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "site"))
