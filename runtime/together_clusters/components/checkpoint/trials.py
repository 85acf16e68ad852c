"""Trial parameters of a sweep: in the pod's environment (a trial JobSet), or the entry of its index in the
trials file (an Indexed Job)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from .contract import ENV_TRIAL_INDEX, ENV_TRIAL_PARAMETERS, ENV_TRIAL_PARAMETERS_FILE


def trial_parameters(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """This pod's trial parameters: TRIAL_PARAMETERS, else entry TRIAL_INDEX of the JSON list in
    TRIAL_PARAMETERS_FILE."""
    env = os.environ if environ is None else environ
    inline = env.get(ENV_TRIAL_PARAMETERS)
    if inline is not None:
        own: dict[str, Any] = json.loads(inline)
        return own
    index = int(env[ENV_TRIAL_INDEX])
    with open(env[ENV_TRIAL_PARAMETERS_FILE], encoding="utf-8") as f:
        trials = json.load(f)
    parameters: dict[str, Any] = trials[index]
    return parameters
