"""The dispatcher: one tick (sync, scan, run the batches, commit the replies, move the cursor), the batches it
settles, its side of the live bridge (relay), its event log and tick report, the daemon loop with its lock and wake
socket, and the background process with its systemd unit (server). The top of the bus: it may use every other
sub-package, and none of them uses it."""
