"""The node remediations (``/v1/compute/clusters/{id}/instances/{id}/remediations``), on the API session.
A create or a review is sent once: after an ambiguous failure the remediation is read back."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from . import errors
from .api_session import ApiSession, parse, path_part
from .cluster_calls import cluster_path
from .models import (
    Remediation,
    RemediationApproveRequest,
    RemediationCreateRequest,
    RemediationList,
    RemediationRejectRequest,
)
from .vocabulary import ACTIVE_REMEDIATION_STATES, RemediationMode, RemediationState, RemediationTrigger

log = logging.getLogger(__name__)


class RemediationCalls(ApiSession):
    """The calls on node remediations."""

    def create_remediation(
        self, cluster_id: str, instance_id: str, mode: RemediationMode, reason: str | None = None
    ) -> Remediation:
        """Ask for a remediation of one instance; the API starts it PENDING.

        Sent once (again only after a 429). After an ambiguous failure (no reply, a 5xx, a reply we cannot
        read) the instance's active manual remediation in that mode is this call's: an instance has at most
        one active remediation, so one there before would have made this create a 409.
        """
        path = _remediations_path(cluster_id, instance_id)
        what = f"POST {path}"
        body = RemediationCreateRequest(mode=mode, reason=reason).to_json()
        try:
            made = self._post_create(Remediation, path, body, what)
        except (errors.ServerError, errors.TransportError, errors.UnreadableReplyError) as exc:
            active = [
                r
                for r in self.list_remediations(
                    cluster_id, instance_id, states=list(ACTIVE_REMEDIATION_STATES)
                )
                if r.trigger == "REMEDIATION_TRIGGER_MANUAL" and r.mode == mode
            ]
            if len(active) != 1:
                raise
            log.info(
                "remediation of %s: outcome unknown (%s); found it among the active ones", instance_id, exc
            )
            return active[0]
        if not made.id:
            raise errors.UnreadableReplyError(f"{what}: the reply has no id")
        return made

    def list_remediations(
        self,
        cluster_id: str,
        instance_id: str = "-",
        *,
        states: list[RemediationState] | None = None,
        modes: list[RemediationMode] | None = None,
        triggers: list[RemediationTrigger] | None = None,
        page_size: int = 100,
    ) -> list[Remediation]:
        """Every remediation of an instance (``"-"``: of every instance of the cluster) matching any of the
        ``states``, ``modes`` and ``triggers`` given, following the pages' ``next_page_token``."""
        found: list[Remediation] = []
        token: str | None = None
        tokens: set[str] = set()
        while True:
            page = self.list_remediations_page(
                cluster_id,
                instance_id,
                states=states,
                modes=modes,
                triggers=triggers,
                page_size=page_size,
                page_token=token,
            )
            found += page.remediations
            if not page.has_next or not page.next_page_token:
                return found
            if page.next_page_token in tokens:
                raise errors.UnreadableReplyError(
                    f"GET {_remediations_path(cluster_id, instance_id)}: the listing gave the page token "
                    f"{page.next_page_token!r} twice"
                )
            tokens.add(page.next_page_token)
            token = page.next_page_token

    def list_remediations_page(
        self,
        cluster_id: str,
        instance_id: str = "-",
        *,
        states: list[RemediationState] | None = None,
        modes: list[RemediationMode] | None = None,
        triggers: list[RemediationTrigger] | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> RemediationList:
        """One page of the listing; filters are sent as the official SDK sends them (comma-separated)."""
        path = _remediations_path(cluster_id, instance_id)
        params: dict[str, str | int] = {}
        for name, values in (("state", states), ("mode", modes), ("trigger", triggers)):
            if values:
                params[name] = ",".join(values)
        if page_size is not None:
            params["page_size"] = page_size
        if page_token:
            params["page_token"] = page_token
        return parse(RemediationList, self._request("GET", path, params=params or None), f"GET {path}")

    def get_remediation(self, cluster_id: str, instance_id: str, remediation_id: str) -> Remediation:
        """One remediation of one instance; ``NotFoundError`` when there is none."""
        path = _remediation_path(cluster_id, instance_id, remediation_id)
        return _the_remediation(
            remediation_id, parse(Remediation, self._request("GET", path), f"GET {path}"), f"GET {path}"
        )

    def approve_remediation(
        self,
        cluster_id: str,
        instance_id: str,
        remediation_id: str,
        comment: str | None = None,
        mode: RemediationMode | None = None,
    ) -> Remediation:
        """Approve a remediation awaiting approval (``ConflictError`` otherwise), perhaps in another ``mode``
        (the API refuses ``REMEDIATION_MODE_HOST_POWER_CYCLE`` here: ``ValidationError``)."""
        body = RemediationApproveRequest(comment=comment, mode=mode).to_json()
        return self._review(
            cluster_id,
            instance_id,
            remediation_id,
            "approve",
            body,
            done=lambda r: r.review_time is not None and r.state not in ("PENDING_APPROVAL", "CANCELLED"),
        )

    def reject_remediation(
        self, cluster_id: str, instance_id: str, remediation_id: str, comment: str | None = None
    ) -> Remediation:
        """Reject a remediation awaiting approval (``ConflictError`` otherwise): it ends CANCELLED."""
        body = RemediationRejectRequest(comment=comment).to_json()
        return self._review(
            cluster_id,
            instance_id,
            remediation_id,
            "reject",
            body,
            done=lambda r: r.review_time is not None and r.state == "CANCELLED",
        )

    def cancel_remediation(self, cluster_id: str, instance_id: str, remediation_id: str) -> Remediation:
        """Cancel a remediation in PENDING_APPROVAL or PENDING (``ConflictError`` in any other state)."""
        return self._review(
            cluster_id, instance_id, remediation_id, "cancel", None, done=lambda r: r.state == "CANCELLED"
        )

    def _review(
        self,
        cluster_id: str,
        instance_id: str,
        remediation_id: str,
        action: str,
        body: dict[str, Any] | None,
        done: Callable[[Remediation], bool],
    ) -> Remediation:
        """POST an action on a remediation once (again only after a 429). After an ambiguous failure the
        remediation is read back: if the action shows (``done``), that is the answer; otherwise the failure.

        A 409 is read back too: the remediation has left the state the action needs, and when it left it for
        the one the action leads to (a request delivered twice on the way, its first copy done; or a reviewer
        before us), what the caller asked for holds, and saying it failed would send them to do it again."""
        path = f"{_remediation_path(cluster_id, instance_id, remediation_id)}/{action}"
        what = f"POST {path}"
        try:
            reply = self._post_create(Remediation, path, body, what)
        except (
            errors.ServerError,
            errors.TransportError,
            errors.UnreadableReplyError,
            errors.ConflictError,
        ) as exc:
            try:
                now = self.get_remediation(cluster_id, instance_id, remediation_id)
            except (errors.APIError, errors.TransportError, errors.UnreadableReplyError):
                raise exc from None
            if not done(now):
                raise
            log.info("%s of remediation %s: outcome unknown (%s); it shows done", action, remediation_id, exc)
            return now
        return _the_remediation(remediation_id, reply, what)


def _the_remediation(remediation_id: str, remediation: Remediation, what: str) -> Remediation:
    """``remediation`` if it is the one asked for."""
    if remediation.id != remediation_id:
        raise errors.UnreadableReplyError(
            f"{what}: the reply is not remediation {remediation_id} (its id is {remediation.id!r})"
        )
    return remediation


def _remediations_path(cluster_id: str, instance_id: str) -> str:
    """``.../instances/{instance_id}/remediations``; ``instance_id`` ``"-"`` means every instance (listing)."""
    return f"{cluster_path(cluster_id)}/instances/{path_part('instance_id', instance_id)}/remediations"


def _remediation_path(cluster_id: str, instance_id: str, remediation_id: str) -> str:
    return f"{_remediations_path(cluster_id, instance_id)}/{path_part('remediation_id', remediation_id)}"
