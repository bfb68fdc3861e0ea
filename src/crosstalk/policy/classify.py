"""Put an inbound sender into exactly one ACL bucket, from the transport-proven identity only."""

from __future__ import annotations

from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy.roles import Bucket
from crosstalk.policy.view import ReceiverView


def classify(sender: Sender, view: ReceiverView) -> Bucket:
    """parent, children, peers and agents need a verified agent_id; a claimed name never earns them."""
    if sender.sender_class is SenderClass.VERIFIED:
        agent_id = sender.agent_id
        if not agent_id:
            # "Verified" with no agent behind it proves nothing; refuse to guess rather than call it an agent.
            return Bucket.UNKNOWN
        if view.owner is not None and agent_id == view.owner:
            return Bucket.PARENT
        if agent_id in view.children:
            return Bucket.CHILDREN
        # The peer list may hold names; a verified sender's name comes from its descriptor, so it is proven.
        if agent_id in view.peers or (sender.name is not None and sender.name in view.peers):
            return Bucket.PEERS
        return Bucket.AGENTS
    if sender.sender_class is SenderClass.EXTERNAL:
        return Bucket.EXTERNAL
    return Bucket.UNKNOWN
