"""The twin's errors are the distribution's (``TwinError`` under ``TogetherError``) and stay catchable as the
built-in types callers used before: a wait that runs out is a ``TimeoutError``, a failed control plane a
``RuntimeError``. No binaries needed: nothing is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from together_clusters.emulator.kubernetes import twin as twin_module
from together_clusters.emulator.kubernetes.binaries import Binaries
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.errors import TogetherError, TwinError, TwinTimeout


def _twin(root: Path) -> twin_module.Twin:
    return twin_module.Twin(
        Binaries(kubernetes=root / "absent", kwok=root / "absent"),
        root,
        TwinOptions(),
        twin_module.TwinHooks(
            view=list,
            attach=lambda cluster_id, api: None,
            serving=lambda cluster_id: None,
            failed=lambda cluster_id: None,
        ),
        keep_data=False,
    )


def test_wait_ready_that_runs_out_is_a_twin_timeout_and_a_timeout_error(tmp_path):
    with pytest.raises(TwinTimeout, match="cluster c-1 was not ready after 0.2s") as caught:
        _twin(tmp_path).wait_ready("c-1", timeout=0.2)
    assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, TogetherError)


def test_wait_ready_on_a_failed_control_plane_is_a_twin_error_with_the_twins_errors(tmp_path):
    twin = _twin(tmp_path)
    plane = object.__new__(twin_module._Plane)  # only its phase is read
    plane.phase = "failed"
    twin._planes["c-1"] = plane
    twin.errors.append("cluster c-1: etcd exited with code 1, 5 times in a row")
    with pytest.raises(TwinError, match="etcd exited with code 1") as caught:
        twin.wait_ready("c-1", timeout=5)
    assert isinstance(caught.value, RuntimeError)
