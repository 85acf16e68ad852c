"""The fault campaign, on every run: a fixed-seed subset, and one more seed drawn fresh each run (printed,
so a failure can be replayed with ``CAMPAIGN_FRESH_SEED``). ``CAMPAIGN_SEQUENCES`` (default 10) and
``CAMPAIGN_SEED`` (default 9) run a larger or different fixed one:

    CAMPAIGN_SEQUENCES=200 CAMPAIGN_SEED=1 .venv/bin/pytest tests/campaign -k in_process -s
    CAMPAIGN_FRESH_SEED=123456 .venv/bin/pytest tests/campaign -k fresh -s
"""

from __future__ import annotations

import os

import pytest

from .runner import Campaign, ProxiedEmulator, Results

# The fresh seed's sequences: enough to draw most fault kinds, few enough for the CI budget.
FRESH_SEQUENCES = 6


def _run(campaign: ProxiedEmulator, sequences: int) -> Results:
    try:
        return campaign.run(sequences)
    finally:
        campaign.close()


def _report(results: Results, seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\n{results.summary()} (seed {seed})")
        print(f"faults by kind: {dict(sorted(results.faults.items()))}")
        if results.violations:
            for failure in results.failures:
                print(f"failed: {failure}")
        for violation in results.violations:
            print(f"VIOLATION {violation}")


def test_in_process_campaign_keeps_every_invariant(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    sequences = int(os.environ.get("CAMPAIGN_SEQUENCES", "10"))
    seed = int(os.environ.get("CAMPAIGN_SEED", "9"))
    results = _run(Campaign(tmp_path, seed), sequences)
    _report(results, seed, capsys)
    assert results.sequences == sequences
    assert results.faults_injected > 0
    assert results.violations == []


def test_volume_campaign_loses_orphans_and_duplicates_no_volume(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .volume_campaign import VolumeCampaign

    sequences = int(os.environ.get("CAMPAIGN_SEQUENCES", "10"))
    seed = int(os.environ.get("CAMPAIGN_SEED", "9"))
    results = _run(VolumeCampaign(tmp_path, seed), sequences)
    with capsys.disabled():
        print(f"\nvolume {results.summary()} (seed {seed})")
        for violation in results.violations:
            print(f"VIOLATION {violation}")
    assert results.sequences == sequences
    assert results.faults_injected > 0
    assert results.violations == []


def test_in_process_campaign_on_a_fresh_seed(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """A seed the campaign has not seen: the fixed seeds passed while seed 4242 left a paid cluster
    untracked. The seed is printed first, so a failure can be replayed."""
    seed = int(os.environ.get("CAMPAIGN_FRESH_SEED") or int.from_bytes(os.urandom(4), "big"))
    with capsys.disabled():
        print(f"\nfresh campaign seed: {seed} (replay: CAMPAIGN_FRESH_SEED={seed})")
    results = _run(Campaign(tmp_path, seed), FRESH_SEQUENCES)
    _report(results, seed, capsys)
    assert results.sequences == FRESH_SEQUENCES
    assert results.violations == []


def test_a_create_lost_while_the_listing_lagged_is_recovered_by_the_next_run(tmp_path) -> None:
    """Seed 4242, sequence 30: a create met a 502 while the listing lagged past the reconcile window and
    the cluster ran on untracked (and the harness crashed on its own 409). Now the next run of the stack
    refuses naming it, the campaign follows the recovery, and nothing is left untracked."""
    campaign = Campaign(tmp_path, 4242)
    try:
        campaign.run_sequence(30)
    finally:
        campaign.close()
    assert campaign.results.violations == []
    assert campaign.results.untracked_appeared == campaign.results.untracked_recovered == 1
