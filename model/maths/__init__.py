"""The papers' maths as pure functions: caches, energy, links, mixing, PSFL, MoFeL, schedules."""
