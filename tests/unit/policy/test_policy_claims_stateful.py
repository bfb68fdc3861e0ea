"""Hypothesis state machine over a few agents claiming and releasing each other."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from crosstalk.policy import ClaimState, Role, claim, release
from crosstalk.policy.errors import ClaimError

AGENTS = ["a" * 16, "b" * 16, "c" * 16, "d" * 16]
agents = st.sampled_from(AGENTS)


class Claims(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.states: dict[str, ClaimState] = {a: ClaimState() for a in AGENTS}

    @rule(subject=agents, claimer=agents)
    def try_claim(self, subject: str, claimer: str) -> None:
        before = self.states[subject]
        claimer_role = self.states[claimer].role
        try:
            after = claim(before, target_id=subject, claimer_id=claimer, claimer_role=claimer_role)
        except ClaimError as err:
            assert err.reason in {"self_claim", "already_claimed", "worker_cannot_claim"}
            if err.reason == "self_claim":
                assert subject == claimer
            elif err.reason == "already_claimed":
                assert before.owner is not None
            else:
                assert claimer_role is Role.WORKER
            return
        assert subject != claimer and before.owner is None and claimer_role is not Role.WORKER
        assert after == ClaimState(Role.WORKER, claimer)
        self.states[subject] = after

    @rule(subject=agents, requester=agents)
    def try_release(self, subject: str, requester: str) -> None:
        before = self.states[subject]
        try:
            after = release(before, target_id=subject, requester_id=requester)
        except ClaimError as err:
            assert err.reason in {"self_release", "not_claimed", "not_owner"}
            if before.owner is not None and requester != subject:
                # Only the owner can release: anyone else is told so.
                assert requester != before.owner and err.reason == "not_owner"
            return
        # Only the owner can release.
        assert requester == before.owner
        assert after == ClaimState()
        self.states[subject] = after

    @rule(agent=agents, role=st.sampled_from([Role.PRIMARY, Role.ORCHESTRATOR, Role.PEER]))
    def set_own_role(self, agent: str, role: Role) -> None:
        # An unclaimed agent may pick orchestrator or peer; a claimed one stays a worker.
        if self.states[agent].owner is None:
            self.states[agent] = ClaimState(role, None)

    @invariant()
    def never_owns_itself(self) -> None:
        for agent, state in self.states.items():
            assert state.owner != agent

    @invariant()
    def owner_iff_worker(self) -> None:
        for state in self.states.values():
            assert (state.owner is not None) == (state.role is Role.WORKER)

    @invariant()
    def owners_are_known_agents(self) -> None:
        for state in self.states.values():
            assert state.owner is None or state.owner in self.states

    @invariant()
    def ownership_has_no_cycles(self) -> None:
        for start in AGENTS:
            seen = {start}
            owner = self.states[start].owner
            while owner is not None:
                assert owner not in seen, f"ownership cycle through {owner}"
                seen.add(owner)
                owner = self.states[owner].owner


Claims.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
TestClaims = Claims.TestCase
