"""Property test of the receiver chain: random sequences of senders, reused message ids, kinds, transports, fake
harness steps, concurrent bursts, role changes and restarts, checked against the chain's invariants:

  - each (sender, message_id) reaches the session at most once (in fact each message_id does);
  - every answer is a send state (never `dispatching`, `submitted`, `recovered`);
  - every accepted/queued answer (ping aside) has received + dispatch + outcome records with that state;
  - a (sender, message_id) that was only ever rejected has no `received` record;
  - once a (sender, message_id) has a non-rejected answer, every later answer repeats that state.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from crosstalk.core.ids import new_message_id
from crosstalk.core.sender import Sender
from crosstalk.core.states import SEND_STATES, State
from crosstalk.journal import records as R
from crosstalk.policy import Role
from tests.support.receiver import ALICE, ANON, CAROL, CI, Rig, inbound, make_tmp, msg, rm_tmp

SENDERS = [ALICE, CAROL, CI, ANON, Sender.unverified("dave")]
KINDS = ["inform", "inform", "ask", "command", "meta", "ping"]
STEPS = ["accept", "queue", "race", "fallback", "malformed", "refuse", "presend", "disconnect", "hang"]
N_IDS = 6
RULE_TIMEOUT_S = 30.0

send_args = st.tuples(
    st.sampled_from(range(len(SENDERS))),
    st.integers(0, N_IDS - 1),
    st.sampled_from(KINDS),
    st.sampled_from(["uds", "a2a"]),
    st.booleans(),  # native (only meaningful on uds)
    st.sampled_from(STEPS),
)


class ChainMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = make_tmp()
        self.loop = asyncio.new_event_loop()
        self.rig = Rig(self.root, inject_timeout_s=0.05)
        self.fake = self.rig.fake
        self.ids = [new_message_id() for _ in range(N_IDS)]
        # (dedupe key or None for native, message_id, kind, outcome) in answer order
        self.answers: list[tuple[str | None, str, str, object]] = []
        self.restarts = 0

    # ------------------------------------------------------------------ driving
    def _run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, RULE_TIMEOUT_S))

    def _build(self, args):
        s_i, id_i, kind, transport, native, step = args
        sender = SENDERS[s_i]
        native = native and transport == "uds"
        m = msg(f"text {id_i} {kind}", kind=kind, mid=None if native else self.ids[id_i])
        self.fake.push(step)
        return inbound(m, sender, transport, native=native), (None if native else sender.dedupe_key), kind

    def _record(self, key, inb, kind, out) -> None:
        self.answers.append((key, inb.message.message_id, kind, out))

    @rule(args=send_args)
    def send(self, args):
        inb, key, kind = self._build(args)
        out = self._run(self.rig.receiver.receive(inb))
        self._record(key, inb, kind, out)

    @rule(batch=st.lists(send_args, min_size=2, max_size=6))
    def burst(self, batch):
        built = [self._build(a) for a in batch]

        async def go():
            return await asyncio.gather(*(self.rig.receiver.receive(inb) for inb, _, _ in built))

        outs = self._run(go())
        for (inb, key, kind), out in zip(built, outs, strict=True):
            self._record(key, inb, kind, out)

    @rule(args=send_args, copies=st.integers(2, 6))
    def duplicates_at_once(self, args, copies):
        inb, key, kind = self._build((*args[:4], False, args[5]))  # a native frame always has a fresh id

        async def go():
            return await asyncio.gather(*(self.rig.receiver.receive(inb) for _ in range(copies)))

        outs = self._run(go())
        for out in outs:
            self._record(key, inb, kind, out)
        if key is not None:
            assert len({(o.state, o.reason) for o in outs}) == 1, outs

    @rule(worker=st.booleans())
    def change_role(self, worker):
        self.rig.role = Role.WORKER if worker else Role.PRIMARY
        self.rig.owner = ALICE.agent_id if worker else None

    @precondition(lambda self: self.restarts < 3)
    @rule()
    def restart(self):
        role, owner = self.rig.role, self.rig.owner
        self.rig.close()
        self.rig = Rig(self.root, inject_timeout_s=0.05, fake=self.fake, role=role, owner=owner)
        self.restarts += 1
        # Every earlier receive finished, so nothing is left between claim and outcome.
        assert self.rig.receiver.reconcile() == []

    # ------------------------------------------------------------------ invariants
    @invariant()
    def at_most_one_write_per_message(self):
        counts = Counter(w["message_id"] for w in self.fake.writes)
        assert all(n == 1 for n in counts.values()), counts

    @invariant()
    def answers_are_send_states(self):
        for *_, out in self.answers:
            assert out.state in SEND_STATES, out

    def teardown(self):
        try:
            self._check_journal()
        finally:
            self.rig.close()
            self.loop.close()
            rm_tmp(self.root)

    def _check_journal(self):
        records = self.rig.records()
        received = defaultdict(list)
        types = defaultdict(list)
        outcomes = defaultdict(list)
        for rec in records:
            mid = R.message_id_of(rec)
            types[mid].append(rec["type"])
            if rec["type"] == R.RECEIVED:
                received[mid].append(rec["dedupe_key"])
            elif rec["type"] == R.OUTCOME:
                outcomes[mid].append(rec["state"])
        written = Counter(w["message_id"] for w in self.fake.writes)

        by_key = defaultdict(list)
        for key, mid, kind, out in self.answers:
            by_key[(key, mid)].append((kind, out))
            if out.state in (State.ACCEPTED, State.QUEUED) and kind != "ping":
                t = [x for x in types[mid] if x != R.REJECTED]
                assert t == [R.RECEIVED, R.DISPATCH, R.OUTCOME], (mid, types[mid])
                assert outcomes[mid] == [out.state.value]
                assert written[mid] == 1
            if out.state is State.UNREACHABLE:
                assert written[mid] == 0
            if key is None:
                assert received[mid] == [None] or out.state is State.REJECTED or kind == "ping"

        for (key, mid), seq in by_key.items():
            states = [o.state for _, o in seq]
            if key is not None and all(s is State.REJECTED for s in states):
                assert key not in received[mid], (key, mid, seq)
            settled = [o for k, o in seq if o.state is not State.REJECTED and k != "ping"]
            if key is not None and settled:
                first = settled[0]
                later = seq[[o for _, o in seq].index(first) + 1 :]
                for k, o in later:
                    if k == "ping":
                        continue
                    # a later copy of a settled (sender, id) is a duplicate: the same state, no new write
                    assert o.state is first.state, (key, mid, seq)
        assert all(n <= 1 for n in written.values())
        for mid in written:
            assert any(
                m == mid and o.state in (State.ACCEPTED, State.QUEUED, State.UNKNOWN) for _, m, _, o in self.answers
            ), mid


ChainMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_receiver_chain_invariants = ChainMachine.TestCase
