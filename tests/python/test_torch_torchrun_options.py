"""tdistrun takes every option of the installed torch's torchrun (and torch.distributed.launch), in
every spelling torchrun's parser has: read from torch's own parser, so a torch release that adds an
option fails here until tdistrun knows it."""
import os
import subprocess

import pytest

torch_run = pytest.importorskip("torch.distributed.run")
from tdist import _build_info  # noqa: E402

TDISTRUN = os.environ.get("TDIST_RUN_BINARY") or _build_info.TDISTRUN_BUILD


def _option_strings():
    """Each option string of torchrun's parser, with the action that says whether it takes a value."""
    seen = {}
    for action in torch_run.get_args_parser()._actions:
        for name in action.option_strings:
            if name not in ("-h", "--help"):
                seen[name] = action
    return seen


def test_every_torchrun_option_is_known():
    if not TDISTRUN or not os.path.exists(TDISTRUN):
        pytest.skip("tdistrun is not built")
    refused = []
    # torch.distributed.launch adds --use-env (a flag) to torchrun's parser.
    commands = [[name] for name in ("--use-env", "--use_env")]
    for name, action in sorted(_option_strings().items()):
        commands.append([name] if action.nargs == 0 else [name, str(action.choices[0]) if action.choices else "1"])
    assert len(commands) > 50, commands  # every option in both spellings
    for args in commands:
        # --version ends the command line once the option's name was taken.
        r = subprocess.run([TDISTRUN] + args + ["--version"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            refused.append(f"{' '.join(args)}: {r.stderr.strip()}")
    assert not refused, "tdistrun refuses torchrun's options:\n" + "\n".join(refused)
