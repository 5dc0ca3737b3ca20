"""Memorable agent names: an adjective and a noun, such as ``BlueLake``.

Generated names are easy to say and to type, carry no meaning about the
agent's role, and are picked at random until one is free in the project.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

ADJECTIVES = (
    "Amber", "Azure", "Bold", "Brave", "Bright", "Blue", "Brisk", "Calm", "Clever", "Coral",
    "Crimson", "Swift", "Eager", "Fair", "Gentle", "Golden", "Green", "Grey", "Happy", "Indigo",
    "Jolly", "Keen", "Kind", "Lively", "Lucky", "Merry", "Misty", "Noble", "Olive", "Orange",
    "Pink", "Plum", "Proud", "Purple", "Quiet", "Rapid", "Red", "Rosy", "Ruby", "Rustic",
    "Sandy", "Scarlet", "Silver", "Snowy", "Sunny", "Teal", "Tidy", "Violet", "Warm", "White",
    "Wild", "Wise", "Witty", "Yellow", "Zesty",
)

NOUNS = (
    "Badger", "Bear", "Beacon", "Brook", "Canyon", "Castle", "Cedar", "Cliff", "Cloud", "Comet",
    "Creek", "Crow", "Dawn", "Deer", "Dog", "Dune", "Eagle", "Falcon", "Fern", "Field",
    "Finch", "Forest", "Fox", "Glacier", "Grove", "Harbor", "Hawk", "Heron", "Hill", "Island",
    "Lake", "Lantern", "Maple", "Meadow", "Mesa", "Moon", "Mountain", "Oak", "Otter", "Owl",
    "Peak", "Pine", "Pond", "Prairie", "Raven", "Reef", "Ridge", "River", "Robin", "Sparrow",
    "Spring", "Star", "Stone", "Summit", "Valley", "Willow", "Wolf",
)


def generate_name(taken: Callable[[str], bool], attempts: int = 200) -> str:
    """A random adjective+noun name for which ``taken(name)`` is false.

    After many collisions (a crowded project) a short number is appended, so
    a free name is always found.
    """
    for i in range(attempts):
        name = secrets.choice(ADJECTIVES) + secrets.choice(NOUNS)
        if i >= attempts // 2:
            name += str(secrets.randbelow(1000))
        if not taken(name):
            return name
    while True:
        name = secrets.choice(ADJECTIVES) + secrets.choice(NOUNS) + secrets.token_hex(3)
        if not taken(name):
            return name
