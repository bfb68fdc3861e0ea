"""What the dispatcher has to do and one model run doing it: the message files added between two commits read and
parsed (reader), what among them is ours (scan: batches, live deliveries, rejections), the thread a batch continues,
the prompt, the headless run of a model CLI (runner, invoke), the reply files it leads to, and which machines claim a
model. Uses protocol, git and transport; knows nothing of the dispatcher's loop, workflows or live agents."""
