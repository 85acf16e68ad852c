"""The fault campaign, a fixed-seed subset on every run. ``CAMPAIGN_SEQUENCES`` (default 10) and
``CAMPAIGN_SEED`` (default 9) run a larger or different one:

    CAMPAIGN_SEQUENCES=200 CAMPAIGN_SEED=1 .venv/bin/pytest tests/campaign -k in_process -s
"""

from __future__ import annotations

import os

import pytest

from .runner import Campaign


def test_in_process_campaign_keeps_every_invariant(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    sequences = int(os.environ.get("CAMPAIGN_SEQUENCES", "10"))
    seed = int(os.environ.get("CAMPAIGN_SEED", "9"))
    campaign = Campaign(tmp_path, seed)
    try:
        results = campaign.run(sequences)
    finally:
        campaign.close()
    with capsys.disabled():
        print(f"\n{results.summary()} (seed {seed})")
        print(f"faults by kind: {dict(sorted(results.faults.items()))}")
        if results.violations:
            for failure in results.failures:
                print(f"failed: {failure}")
        for violation in results.violations:
            print(f"VIOLATION {violation}")
    assert results.sequences == sequences
    assert results.faults_injected > 0
    assert results.violations == []


def test_volume_campaign_loses_orphans_and_duplicates_no_volume(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .volume_campaign import VolumeCampaign

    sequences = int(os.environ.get("CAMPAIGN_SEQUENCES", "10"))
    seed = int(os.environ.get("CAMPAIGN_SEED", "9"))
    campaign = VolumeCampaign(tmp_path, seed)
    try:
        results = campaign.run(sequences)
    finally:
        campaign.close()
    with capsys.disabled():
        print(f"\nvolume {results.summary()} (seed {seed})")
        for violation in results.violations:
            print(f"VIOLATION {violation}")
    assert results.sequences == sequences
    assert results.faults_injected > 0
    assert results.violations == []
