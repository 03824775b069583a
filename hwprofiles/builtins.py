"""Regenerate the derived built-in profiles in `hwprofiles/data/`.

    python -m hwprofiles.builtins [SHARED_DIR]

SHARED_DIR holds `profiles/vidur/` and `profiles/splitwise/` (default:
`../shared` beside the repository). Derived and synthetic built-ins are
pure functions of those files and of `hwprofiles/roofline.py`, so running
this again reproduces the committed CSVs byte for byte (a test checks it).
The profiles measured on a machine (`cpu-*`, `h200-*-measured`) are written
by `specplan profile` instead and are not touched here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from hwprofiles.derive_vidur import vidur_profile
from hwprofiles.fileformat import DATA_DIR, write_profile_csv
from hwprofiles.import_splitwise import splitwise_profile
from hwprofiles.modelshape import load_shape
from hwprofiles.profile import StepProfile
from hwprofiles.roofline import roofline_profile

DEFAULT_SHARED = Path(__file__).resolve().parents[2] / "shared"


def derived_builtins(shared: Path) -> dict[str, Callable[[], StepProfile]]:
    """Built-in name → a function that derives it from the shared files (or the roofline)."""
    vidur = shared / "profiles" / "vidur"
    splitwise = shared / "profiles" / "splitwise" / "perf_model.csv"
    return {
        "h100-llama2-7b": lambda: vidur_profile(
            vidur / "h100_meta-llama_Llama-2-7b-hf_mlp.csv", load_shape("llama2-7b"), 1, "h100-llama2-7b"),
        "h100-llama2-70b-tp4": lambda: vidur_profile(
            vidur / "h100_meta-llama_Llama-2-70b-hf_mlp.csv", load_shape("llama2-70b"), 4, "h100-llama2-70b-tp4"),
        "splitwise-h100-llama2-70b-tp4": lambda: splitwise_profile(
            splitwise, "llama2-70b", "h100-80gb", 4, name="splitwise-h100-llama2-70b-tp4"),
        "h200-llama3-8b": lambda: roofline_profile(load_shape("llama3-8b"), "h200"),
        "b200-llama3-8b": lambda: roofline_profile(load_shape("llama3-8b"), "b200"),
    }


def regenerate(shared: Path, out_dir: Path = DATA_DIR) -> list[Path]:
    """Write every derived built-in into `out_dir`; returns the paths written."""
    return [write_profile_csv(make(), out_dir / f"{name}.csv") for name, make in derived_builtins(shared).items()]


def main(argv: list[str]) -> int:
    shared = Path(argv[0]) if argv else DEFAULT_SHARED
    for path in regenerate(shared):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
