"""Mesa's own loops end at the ``steps`` setting: ``running`` turns False after the last step,
so ``Model.run_model()``, ``mesa.batch_run`` (with or without ``max_steps``) and the app's
Play stop by themselves (projectmesa's examples end their runs the same way)."""

from __future__ import annotations

import mesa

import mobidfl

WORLD = {"map": "grid:3x3:100", "vehicles": 4, "pedestrians": 0, "sensors": 0, "uavs": 0,
         "learning": False}


class Capped(mobidfl.MobiDFLModel):
    """Fails (does not hang) if Mesa's loop would go past the configured steps."""

    def step(self) -> None:
        assert self.steps <= self.config.steps, "running stayed True past the steps setting"
        super().step()


def test_run_model_stops_after_the_configured_steps():
    # Prepare
    world = Capped(**WORLD, steps=2, seed=0)
    assert world.running
    # Execute: Mesa's loop is `while self.running: self.step()`
    world.run_model()
    # Assert
    assert world.steps == 2 and not world.running
    assert len(world.model_table()) == 3  # step 0 and the two steps


def test_batch_run_returns_runs_of_the_configured_steps_whatever_max_steps():
    # Prepare / Execute: one sweep with Mesa's default max_steps (1000), one with 5; seeds
    # as Mesa names them (rng) and as a setting (seed)
    runs = {
        max_steps: mesa.batch_run(Capped, parameters={**WORLD, "steps": 2},
                                  rng=[0, 1], max_steps=max_steps, display_progress=False)
        for max_steps in (1000, 5)
    }
    by_setting = mesa.batch_run(mobidfl.MobiDFLModel,
                                parameters={**WORLD, "steps": 2, "seed": [0, 1]},
                                display_progress=False)
    # Assert: each of the two seeds' rows is its last step, step 2, and a seed gives the
    # same run whichever way it is named
    for rows in runs.values():
        assert sorted(r["rng"] for r in rows) == [0, 1]
        assert {r["Step"] for r in rows} == {2}
    assert sorted(r["seed"] for r in by_setting) == [0, 1]
    first = {r["rng"]: r["contacts"] for r in runs[1000]}
    assert {r["seed"]: r["contacts"] for r in by_setting} == first


def test_a_seed_is_a_setting_and_not_replaced_by_batch_runs_none():
    # Prepare / Execute: what batch_run passes when no rng is given
    a = mobidfl.MobiDFLModel(**WORLD, steps=1, seed=5, rng=None)
    b = mobidfl.MobiDFLModel(**WORLD, steps=1, rng=5)
    # Assert
    assert a.config.seed == b.config.seed == 5


def test_run_with_fewer_steps_keeps_running_and_continues():
    # Prepare: a checkpoint-style half run
    world = mobidfl.MobiDFLModel(**WORLD, steps=3, seed=0)
    # Execute
    world.run(steps=1)
    assert world.running and world.steps == 1
    world.run()
    # Assert
    assert world.steps == 3 and not world.running
