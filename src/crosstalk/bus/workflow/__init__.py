"""Workflows: a fan-out of one task to several models and a synthesis of their answers, run by the dispatcher's
runtime and never by a model. The plan a model proposes and its checks (plan), the progress read back from the
channel's history (progress), and the engine that places the copies and the synthesis and advances them one commit at
a time (engine). Uses protocol, git, transport and runs; the dispatcher drives it."""
