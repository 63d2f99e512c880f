"""tools/check_commits.py: the subjects `make lint` accepts."""

from __future__ import annotations

import pytest

from tools.check_commits import problems


@pytest.mark.parametrize("subject", [
    "scheduler/queue: requeue deferred resizes by node",
    "tests, docs: compose.yaml run for real in make test",
    "cli, scheduler: flags that were accepted and ignored are refused",
    "machinery/informer: reflector_last_resource_version per kind",
    "README: the compose path",
    "make image: kplane:dev without a registry",
])
def test_area_and_what_changed_within_72_characters_pass(subject):
    assert problems(subject) == []


@pytest.mark.parametrize("subject, why", [
    ("remove scaffolding left from before every component existed", ["not `area: what changed`"]),
    ("one source for what was written twice: the protobuf types kept as given (jsonconv.OPAQUE_TYPES, used)",
     ["101 characters (at most 72)", "not `area: what changed`"]),
    ("scheduler:no space after the colon", ["not `area: what changed`"]),
    ("scheduler: " + "x" * 62, ["73 characters (at most 72)"]),
])
def test_long_or_arealess_subjects_fail(subject, why):
    assert problems(subject) == why
