"""Every operation of backend "tdist" against Gloo, on 1 to 5 ranks (see torch_op_checks)."""

import pytest

import torch_harness
import torch_op_checks


@pytest.mark.parametrize("world", [1, 2, 3, 4, 5, 8])
def test_every_op_matches_gloo(world):
    torch_harness.run_ranks(torch_op_checks.check_all, world)
