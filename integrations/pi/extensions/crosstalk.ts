/**
 * crosstalk for pi 0.73.1: a thin extension around the crosstalk core process (docs/dev/pi-link.md). The core owns identity,
 * the socket, policy and tags; this file starts and stops it, talks JSON lines with it, puts its messages into pi
 * without losing any, and provides /crosstalk, the status line and the tools.
 */
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox"; // resolved by pi's extension loader, wherever this package lives

type Level = "info" | "warning" | "error";
type Mode = "auto" | "steer" | "followUp";
type Json = Record<string, unknown>;
type Outcome = { delivered: "immediate" | "queued" | "noted" } | { error: string };
interface Identity { name?: string; agent_id?: string; role?: string | null; parent?: string | null; accept_from?: string[] }
interface Config { command?: unknown; enableLlmTool?: unknown; enableCrosstalkSetTool?: unknown; enableCrosstalkInspectTool?: unknown }
interface Item { text: string; as: Mode; answer: (o: Outcome) => void } // answered once it is handed to pi

const CALL_TIMEOUT_MS = 15_000;
const START_WAIT_MS = 5_000; // an idle start waits this long for agent_start before the queue moves on
const [TERM_AFTER_MS, KILL_AFTER_MS] = [3_000, 6_000]; // after stdin is closed
const MAX_LINE = 1 << 20;
const DEBUG = process.env.CROSSTALK_PI_DEBUG === "1";
const OFF = "crosstalk is off in this session";
const USAGE = "usage: /crosstalk [status | role <orchestrator|worker|peer> [--parent <handle>] | handle <name> | "
	+ "send|steer|followup <peer> <message> | allow|deny <bucket-or-handle> | peer add|rm <handle>]";
const SEND_MODES: Record<string, Mode> = { send: "auto", steer: "steer", followup: "followUp" };

/** pi evaluates this module afresh for every session (/new, /reload, resume, fork): this outlives them. */
interface Shared { enabled?: boolean; core?: Core; live: Set<ChildProcess>; exitHooked: boolean }
const registry = globalThis as unknown as Record<symbol, Shared | undefined>;
const shared: Shared = (registry[Symbol.for("crosstalk.pi")] ??= { live: new Set(), exitHooked: false });
if (!shared.exitHooked) { // whatever ends pi, no core outlives it
	shared.exitHooked = true;
	process.on("exit", () => { for (const child of shared.live) child.kill("SIGTERM"); });
}

const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const debug = (text: string): void => { if (DEBUG) process.stderr.write(`crosstalk: ${text}\n`); };
const isObject = (v: unknown): v is Json => !!v && typeof v === "object" && !Array.isArray(v);

/** One core process: JSON lines on its stdin and stdout, requests with ids and a timeout. */
class Core {
	identity?: Identity;
	readonly exited: Promise<void>;
	readonly ready: Promise<boolean>; // true on `ready`, false if the core ends first
	private readonly child: ChildProcess;
	private readonly calls = new Map<number, { resolve: (r: Json) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
	private buf = "";
	private nextId = 1;
	private stopping = false;
	private markReady: (ok: boolean) => void = () => {};

	constructor(readonly session: string, argv: string[], private readonly onMessage: (m: Json) => void, onExit: (why: string, expected: boolean) => void) {
		this.ready = new Promise((resolve) => { this.markReady = resolve; });
		this.child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"], env: process.env });
		shared.live.add(this.child);
		this.child.stdout?.setEncoding("utf8").on("data", (chunk: string) => this.read(chunk));
		this.child.stderr?.setEncoding("utf8").on("data", (chunk: string) => { if (DEBUG) process.stderr.write(chunk); });
		this.child.stdin?.on("error", (e) => debug(`core stdin: ${errText(e)}`)); // EPIPE: the exit is reported below
		this.exited = new Promise((resolve) => {
			const finish = (why: string) => {
				if (!shared.live.delete(this.child)) return;
				for (const call of this.calls.values()) { clearTimeout(call.timer); call.reject(new Error(`the core ${why}`)); }
				this.calls.clear();
				this.markReady(false);
				onExit(why, this.stopping);
				resolve();
			};
			this.child.on("error", (e) => { if (this.child.pid === undefined) finish(`could not start (${argv[0]}: ${errText(e)})`); });
			this.child.on("exit", (code, signal) => finish(signal ? `was killed by ${signal}` : `exited with code ${code}`));
		});
	}

	send(message: Json): void {
		if (!this.stopping && this.child.stdin?.writable) this.child.stdin.write(`${JSON.stringify(message)}\n`);
	}

	call(op: string, args: Json = {}): Promise<Json> {
		if (this.stopping) return Promise.reject(new Error("the core is stopping"));
		const id = this.nextId++;
		return new Promise((resolve, reject) => {
			const timeout = () => { this.calls.delete(id); reject(new Error(`the core did not answer ${op} within ${CALL_TIMEOUT_MS / 1000} s`)); };
			const timer = setTimeout(timeout, CALL_TIMEOUT_MS);
			this.calls.set(id, { resolve, reject, timer });
			this.send({ t: "call", id, op, args });
		});
	}

	/** Close stdin; SIGTERM after 3 s and SIGKILL after 6 s if the core is still there. */
	stop(): Promise<void> {
		if (!this.stopping) {
			this.stopping = true;
			this.child.stdin?.end();
			const timers = [TERM_AFTER_MS, KILL_AFTER_MS].map((ms, i) => setTimeout(() => this.child.kill(i ? "SIGKILL" : "SIGTERM"), ms).unref());
			void this.exited.then(() => timers.forEach(clearTimeout));
		}
		return this.exited;
	}

	private read(chunk: string): void {
		this.buf += chunk;
		for (let nl = this.buf.indexOf("\n"); nl >= 0; nl = this.buf.indexOf("\n")) {
			const line = this.buf.slice(0, nl).replace(/\r$/, "");
			this.buf = this.buf.slice(nl + 1);
			if (line.trim()) this.parse(line);
		}
		if (this.buf.length > MAX_LINE) { debug("dropped a line over 1 MiB from the core"); this.buf = ""; }
	}

	private parse(line: string): void {
		let msg: unknown;
		try { msg = JSON.parse(line); } catch { return debug(`not JSON from the core: ${line.slice(0, 200)}`); }
		if (!isObject(msg)) return;
		if (msg.t === "ready") { this.identity = msg as Identity; this.markReady(true); }
		const call = msg.t === "result" && typeof msg.id === "number" ? this.calls.get(msg.id) : undefined;
		if (!call) return this.onMessage(msg);
		this.calls.delete(msg.id as number);
		clearTimeout(call.timer);
		call.resolve(isObject(msg.result) ? msg.result : { ok: false, reason: "the core sent an empty result" });
	}
}

const configPath = (): string => path.join(process.env.HOME || os.homedir(), ".config", "pi-agent-extensions", "crosstalk", "config.json");

function readConfig(): Config {
	try {
		const parsed: unknown = JSON.parse(fs.readFileSync(configPath(), "utf8"));
		return isObject(parsed) ? parsed : {};
	} catch (e) { // no file: all tools but reply stay off
		if ((e as NodeJS.ErrnoException).code !== "ENOENT") process.stderr.write(`crosstalk: ignoring ${configPath()}: ${errText(e)}\n`);
		return {};
	}
}

/** `$CROSSTALK_BIN` (one path), else the config's `command` array, else `crosstalk` on PATH. */
function coreCommand(config: Config): string[] {
	const bin = process.env.CROSSTALK_BIN?.trim();
	const cmd = config.command;
	if (bin) return [bin];
	if (Array.isArray(cmd) && cmd.length > 0 && cmd.every((s) => typeof s === "string" && s)) return cmd as string[];
	return ["crosstalk"];
}

/** PI_CROSSTALK at the first session start: 1/true/yes/on enable; 0/false/no/off or empty disable; else warn, off. */
function enabledByEnv(warn: (text: string, lvl: Level) => void): boolean {
	const raw = process.env.PI_CROSSTALK ?? "";
	const v = raw.trim().toLowerCase();
	if (["1", "true", "yes", "on"].includes(v)) return true;
	if (v && !["0", "false", "no", "off"].includes(v)) warn(`PI_CROSSTALK=${JSON.stringify(raw)} is not 1/0/true/false/yes/no/on/off: crosstalk stays off`, "warning");
	return false;
}

/** A /crosstalk subcommand → the core op and its args, or the usage to show. */
function parseCommand(sub: string, rest: string): { op: string; args: Json } | { usage: string } {
	const words = rest ? rest.split(/\s+/) : [];
	const one = words.length === 1 ? words[0] : undefined;
	switch (sub) {
		case "status": return words.length ? { usage: "usage: /crosstalk status" } : { op: "status", args: {} };
		case "handle": return one ? { op: "set", args: { handle: one } } : { usage: "usage: /crosstalk handle <name>" };
		case "allow": case "deny": return one ? { op: sub, args: { entry: one } } : { usage: `usage: /crosstalk ${sub} <bucket-or-handle>` };
		case "peer":
			return words.length === 2 && ["add", "rm"].includes(words[0])
				? { op: `peer_${words[0]}`, args: { handle: words[1] } } : { usage: "usage: /crosstalk peer add|rm <handle>" };
		case "role": {
			const [role, flag, parent, ...extra] = words;
			if (!role || (flag !== undefined && (flag !== "--parent" || !parent)) || extra.length) {
				return { usage: "usage: /crosstalk role <orchestrator|worker|peer> [--parent <handle>]" };
			}
			return { op: "set", args: parent ? { role, parent } : { role } };
		}
		case "send": case "steer": case "followup": {
			const m = /^(\S+)\s+([\s\S]+)$/.exec(rest);
			if (!m) return { usage: `usage: /crosstalk ${sub} <peer> <message>` };
			const quoted = /^(["'])([\s\S]*)\1$/.exec(m[2]);
			return { op: "send", args: { to: m[1], text: quoted ? quoted[2] : m[2], mode: SEND_MODES[sub] } };
		}
	}
	return { usage: USAGE };
}

const list = (v: unknown): string =>
	Array.isArray(v) && v.length ? v.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(", ") : "none";
const describeStatus = (s: Json): string => `⇄ ${s.name ?? "?"} · role ${s.role ?? "none"}${s.parent ? ` · parent ${s.parent}` : ""}`
	+ ` · accepts ${list(s.accept_from)} · children ${list(s.children)} · peers ${list(s.peers)}`;

function describe(op: string, r: Json): string {
	if (r.ok === false) return `crosstalk ${op} refused: ${r.reason ?? "no reason given"}`;
	if (op === "status") return describeStatus(r);
	if (op === "send") return `sent · ${r.state}${r.delivered ? ` (${r.delivered})` : ""} · id ${r.message_id}`;
	return `crosstalk ${op} done · ${isObject(r.current) ? describeStatus(r.current) : JSON.stringify(r)}`;
}

const toolResult = (r: Json) => ({ content: [{ type: "text" as const, text: JSON.stringify(r) }], details: r });
const modeSchema = Type.Unsafe<Mode>({ type: "string", enum: ["auto", "steer", "followUp"], description: "default auto" });
const roleSchema = Type.Unsafe<string>({ type: "string", enum: ["orchestrator", "worker", "peer"] });

export default function crosstalk(pi: ExtensionAPI): void {
	const config = readConfig();
	let ctx: ExtensionContext | undefined;
	let core: Core | undefined;
	let unread = 0; // inbound items delivered since the user last typed
	const queue: Item[] = [];
	let starting: NodeJS.Timeout | undefined; // a run was asked for while idle; agent_start not seen yet
	let ending = false; // agent_end seen, isIdle() not yet true

	const say = (text: string, lvl: Level = "info"): void => {
		if (ctx?.hasUI) ctx.ui.notify(text, lvl); else process.stderr.write(`crosstalk: ${text}\n`);
	};
	const showStatus = (): void => {
		const name = core?.identity?.name;
		ctx?.ui.setStatus("crosstalk", name ? `⇄ ${name}${unread ? ` [${unread}]` : ""}` : undefined);
	};

	const startCore = (c: ExtensionContext): Core => {
		const argv = [...coreCommand(config), "pi-agent", "--session", c.sessionManager.getSessionId(), "--cwd", c.cwd];
		debug(`starting ${JSON.stringify(argv)}`);
		const started: Core = new Core(c.sessionManager.getSessionId(), argv, (m) => onCoreMessage(started, m), (why, expected) => {
			if (shared.core === started) shared.core = undefined;
			if (core !== started) return;
			core = undefined;
			showStatus();
			if (!expected) { shared.enabled = false; say(`the crosstalk core ${why}: crosstalk is off (/crosstalk starts it again)`, "error"); }
		});
		return (core = shared.core = started);
	};
	const stopCore = async (): Promise<void> => {
		const running = shared.core ?? core; // also a core left by this module's previous evaluation
		core = shared.core = undefined;
		showStatus();
		await running?.stop();
	};
	const disable = async (): Promise<void> => { shared.enabled = false; await stopCore(); };
	const enable = async (c: ExtensionContext): Promise<Core | undefined> => {
		shared.enabled = true;
		const started = core ?? startCore(c);
		return (await started.ready) ? started : undefined;
	};
	/** Runs an op on the core; no core, a timeout or an exit becomes `{ok: false, reason}`. */
	const op = async (name: string, args: Json = {}): Promise<Json> => {
		if (!core) return { ok: false, reason: OFF };
		try { return await core.call(name, args); } catch (e) { return { ok: false, reason: errText(e) }; }
	};

	// ---- delivery (docs/dev/pi-link.md "Delivery"): one FIFO queue, never two idle starts at once ----
	const hand = (item: Item, deliverAs?: "steer" | "followUp"): boolean => {
		try { pi.sendUserMessage(item.text, deliverAs ? { deliverAs } : undefined); } catch (e) { item.answer({ error: errText(e) }); return false; }
		item.answer({ delivered: deliverAs ? "queued" : "immediate" });
		unread++;
		showStatus();
		return true;
	};
	const pump = (): void => {
		while (ctx && queue.length > 0) {
			const idle = ctx.isIdle();
			if (idle ? starting : ending) return; // idle: the run asked for has not started; busy: the run is closing
			const item = queue.shift() as Item;
			if (!idle) { hand(item, item.as === "steer" ? "steer" : "followUp"); continue; }
			starting = setTimeout(() => { starting = undefined; whenIdle(); }, START_WAIT_MS);
			if (!hand(item)) { clearTimeout(starting); starting = undefined; }
		}
	};
	const note = (text: string): void => { // during a run, nextTurn: steered in, the model would answer it
		const busy = !ctx?.isIdle() || starting !== undefined;
		pi.sendMessage({ customType: "crosstalk-meta", content: text, display: true }, { triggerTurn: false, ...(busy ? { deliverAs: "nextTurn" as const } : {}) });
		unread++;
		showStatus();
	};
	const deliver = (text: string, as: unknown, answer: (o: Outcome) => void): void => {
		if (!ctx) return answer({ error: "no active pi session" });
		if (as === "meta") {
			try { note(text); answer({ delivered: "noted" }); } catch (e) { answer({ error: errText(e) }); }
			return;
		}
		queue.push({ text, as: as === "steer" || as === "followUp" ? as : "auto", answer });
		pump(); // a message that must wait (a start pending) is answered when its turn comes: it reaches the model in order
	};
	const whenIdle = (): void => {
		if (!ctx) return;
		if (!ctx.isIdle()) { setTimeout(whenIdle, 20); return; }
		ending = false;
		pump();
	};

	const onCoreMessage = (from: Core, m: Json): void => {
		if (from !== core) return;
		if (m.t === "ready" || m.t === "state") { from.identity = { ...from.identity, ...(m as Identity) }; showStatus(); }
		if (m.t === "deliver") deliver(String(m.text ?? ""), m.as, (o) => from.send({ t: "delivered", ref: String(m.ref), ...o }));
		if (m.t === "notice") say(String(m.text ?? ""), m.level === "warning" || m.level === "error" ? m.level : "info");
	};

	const command = async (args: string, c: ExtensionContext): Promise<{ text: string; lvl: Level }> => {
		if (!args) { // the toggle
			if (core) { await disable(); return { text: "crosstalk off", lvl: "info" }; }
			const started = await enable(c);
			return started ? { text: `crosstalk on · ⇄ ${started.identity?.name ?? "?"}`, lvl: "info" } : { text: "crosstalk did not start", lvl: "error" };
		}
		const sub = args.split(/\s+/, 1)[0];
		const req = parseCommand(sub.toLowerCase(), args.slice(sub.length).trim());
		if ("usage" in req) return { text: req.usage, lvl: "warning" };
		if (!core) return { text: `${OFF}: /crosstalk turns it on`, lvl: "warning" };
		const r = await op(req.op, req.args);
		const unreadNote = req.op === "status" && r.ok !== false ? ` · unread ${unread}` : "";
		return { text: describe(req.op, r) + unreadNote, lvl: r.ok === false ? "warning" : "info" };
	};

	pi.registerCommand("crosstalk", {
		description: "Toggle crosstalk in this session; status, role, handle, send, steer, followup, allow, deny, peer add|rm",
		handler: async (args, c) => {
			ctx = c;
			const { text, lvl } = await command(args.trim(), c);
			say(text, lvl);
		},
	});

	pi.on("session_start", async (_event, c) => {
		ctx = c;
		shared.enabled ??= enabledByEnv(say);
		if (core && core === shared.core && core.session === c.sessionManager.getSessionId()) return; // pi 0.73.1 can announce one session twice
		await stopCore(); // a core of the previous session, or of this one before /reload
		if (shared.enabled && !core) startCore(c);
	});
	pi.on("session_shutdown", async () => { // this session is gone: what never reached its model is told so
		for (const item of queue.splice(0)) item.answer({ error: "the pi session ended before this reached its model" });
		await stopCore();
		clearTimeout(starting);
		ctx = undefined;
	});
	pi.on("agent_start", async () => { clearTimeout(starting); starting = undefined; ending = false; pump(); });
	pi.on("agent_end", async () => { ending = true; setTimeout(whenIdle, 0); });
	pi.on("input", async (event) => { // typed (interactive) or sent by the RPC client: the user has seen the inbound items
		if (event.source !== "extension" && unread > 0) { unread = 0; showStatus(); }
	});

	pi.registerTool({
		name: "reply",
		label: "crosstalk reply",
		description: "Answer an ask that reached this session through crosstalk, a user turn tagged "
			+ "[ask from <bucket>:<handle> · id <message_id>]. The text goes back to the agent that asked.",
		parameters: Type.Object({
			message_id: Type.String({ description: "the id from the ask's tag" }),
			text: Type.String({ description: "the answer" }),
		}),
		execute: async (_id, p) => toolResult(await op("reply", { message_id: p.message_id, text: p.text })),
	});
	if (config.enableLlmTool === true) {
		pi.registerTool({
			name: "talk_to_peer",
			label: "crosstalk send",
			description: "Send a message to another agent session (pi, Claude or Codex) by its crosstalk handle. "
				+ "mode: auto (default), steer (interrupts its current work) or followUp (after its current work).",
			parameters: Type.Object({
				peer: Type.String({ description: "the receiver's handle or agent id" }),
				text: Type.String({ description: "the message" }),
				mode: Type.Optional(modeSchema),
			}),
			execute: async (_id, p) => toolResult(await op("send", { to: p.peer, text: p.text, mode: p.mode ?? "auto" })),
		});
	}
	if (config.enableCrosstalkSetTool === true) {
		pi.registerTool({
			name: "crosstalk_set",
			label: "crosstalk set",
			description: "Turn crosstalk on or off in this session and set its handle, role and parent. Absent fields stay as they are.",
			parameters: Type.Object({
				enabled: Type.Optional(Type.Boolean()),
				handle: Type.Optional(Type.String()),
				role: Type.Optional(roleSchema),
				parent: Type.Optional(Type.String({ description: "the parent's handle (role worker)" })),
			}),
			execute: async (_id, p, _signal, _update, c) => {
				if (p.enabled === false) { await disable(); return toolResult({ ok: true, applied: { enabled: false }, current: { enabled: false } }); }
				const applied: Json = p.enabled === true && !core ? { enabled: true } : {};
				if (applied.enabled && !(await enable(c))) return toolResult({ ok: false, reason: "the crosstalk core did not start" });
				const fields = Object.fromEntries(Object.entries({ handle: p.handle, role: p.role, parent: p.parent }).filter(([, v]) => v !== undefined));
				if (Object.keys(fields).length === 0) return toolResult({ ok: !!core, applied, current: await op("status") });
				const r = await op("set", fields);
				return toolResult({ ...r, applied: { ...applied, ...(isObject(r.applied) ? r.applied : {}) } });
			},
		});
	}
	if (config.enableCrosstalkInspectTool === true) {
		pi.registerTool({
			name: "crosstalk_inspect",
			label: "crosstalk inspect",
			description: "Look up crosstalk agents without changing anything: no handle gives this session's own record, "
				+ "a handle gives that live agent's record, or match null when none has it.",
			parameters: Type.Object({ handle: Type.Optional(Type.String({ description: "a handle or agent id" })) }),
			execute: async (_id, p) => toolResult(await op("inspect", p.handle ? { handle: p.handle } : {})),
		});
	}
}
