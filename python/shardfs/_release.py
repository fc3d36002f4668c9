"""The release of this package: the version of the CMake project at the
root of the repository (its project() line), the one version of shardfs.
An installed wheel carries it in _version.py (written by the build,
python/pyproject.toml); the sources of a checkout read it from there."""
import re
from pathlib import Path


def _from_checkout() -> str:
    top = Path(__file__).resolve().parents[2] / "CMakeLists.txt"
    try:
        text = top.read_text(encoding="utf-8")
    except OSError:
        return "0+unknown"
    m = re.search(r"project\(shardfs VERSION ([0-9]+\.[0-9]+\.[0-9]+)", text)
    return m.group(1) if m else "0+unknown"


try:
    from ._version import __version__
except ImportError:  # not built: the sources of a checkout
    __version__ = _from_checkout()
