"""Rebuild knowledge/ingest/data/person_names.txt and place_names.txt: the given names the
intake reads as a named person (knowledge.ingest.named_persons), and the place names
that are also given names, which it reads as a person only with a person's cue ("Jordan
told me he...", "my friend Jordan"), so "Sam said Austin is hot in July" is no claim
about a person.

Source: the census- and registry-derived first-name lists of Faker's Latin-script
locales (MIT), its lists of countries and US states, and the large cities below whose
names are given names too (Faker's own city lists are generated, not real). Months and
weekdays are never names here. word_names.txt lists the given names that are also
ordinary English words ("Art", "Will", "Grace", "Rock"): Debian's wamerican word list
(`apt-get install wamerican`, /usr/share/dict/american-english) has them in lower case.
Such a name, like a place, needs a person's cue. Run from the repository root:

    python -m bench.build_person_names
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "knowledge" / "ingest" / "data"
CITIES = {"Austin", "Dallas", "Houston", "Phoenix", "Orlando", "Denver", "Charlotte",
          "Jackson", "Madison", "Lincoln", "Paris", "Sydney", "Florence", "Victoria",
          "Adelaide", "Alexandria", "Regina", "Savannah", "Aurora", "Eugene", "Tyler",
          "Raleigh", "Cleveland", "Brooklyn", "Chelsea", "Vienna", "Lima", "Milan", "Valencia",
          "Santiago", "Sofia", "Beverly", "Camden", "Salem", "Troy", "Vernon", "Marion"}
_LATIN_NAME = re.compile(r"[A-Z][a-z]+(?:-[A-Z][a-z]+)?")
MONTHS_AND_DAYS = {
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December", "Monday", "Tuesday", "Wednesday", "Thursday",
    "Friday", "Saturday", "Sunday"}


def _names(attr_names: tuple[str, ...], package: str) -> set[str]:
    out: set[str] = set()
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{package}.{info.name}")
        provider = getattr(module, "Provider", None)
        for attr in attr_names:
            values = getattr(provider, attr, None)
            if isinstance(values, dict):  # weighted lists: name -> frequency
                values = list(values)
            if isinstance(values, (list, tuple)):
                out.update(v for v in values if isinstance(v, str))
    return out


def build() -> tuple[list[str], list[str]]:
    """(given names, given names that are also places)."""
    given = {n for n in _names(("first_names", "first_names_male", "first_names_female",
                                "first_names_nonbinary"), "faker.providers.person")
             if _LATIN_NAME.fullmatch(n)} - MONTHS_AND_DAYS
    places = {word for place in _names(("countries", "states"), "faker.providers.address")
              for word in place.split()} | CITIES
    return sorted(given), sorted(given & places)


WORDS = Path("/usr/share/dict/american-english")


def word_names(names: list[str]) -> list[str]:
    """Given names whose lower-case form is an English word (Debian's wamerican)."""
    words = {line.strip() for line in WORDS.read_text(encoding="utf-8").splitlines()}
    return sorted(n for n in names if n.lower() in words)


def main() -> None:
    names, places = build()
    if not WORDS.exists():
        raise SystemExit(f"{WORDS} is missing: apt-get install wamerican")
    (DATA / "word_names.txt").write_text(
        "# Given names that are also English words (bench/build_person_names.py; "
        "Debian wamerican).\n" + "\n".join(word_names(names)) + "\n", encoding="utf-8")
    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / "person_names.txt").write_text(
        "# Given names (bench/build_person_names.py; Faker's first-name lists, MIT).\n"
        + "\n".join(names) + "\n", encoding="utf-8")
    (DATA / "place_names.txt").write_text(
        "# Given names that are also places (bench/build_person_names.py).\n"
        + "\n".join(places) + "\n", encoding="utf-8")
    print(f"{len(names)} given names, {len(places)} of them places -> {DATA}")


if __name__ == "__main__":
    main()
