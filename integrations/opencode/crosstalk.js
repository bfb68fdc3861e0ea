// crosstalk's OpenCode plugin (OpenCode 1.18.33; plain JavaScript, node builtins only: no build step and nothing
// to install). `crosstalk install opencode` lists this file in opencode.json's "plugin" and `crosstalk mcp --harness
// opencode` in its "mcp". What it does, and nothing else (docs/dev/opencode-adapter.md):
//
// 1. Caller identity: before every call of a crosstalk MCP tool (`crosstalk_<tool>`) it stamps the calling session
//    into the call's arguments ("opencode/session", "opencode/title"), overwriting whatever the model put there.
//    One MCP process serves every session of an OpenCode process and no session id reaches it otherwise.
// 2. The inbox: one unix socket per OpenCode process, <dir>/<pid>.sock (dir: $CROSSTALK_OPENCODE_DIR, else
//    $XDG_RUNTIME_DIR/crosstalk-opencode, else $TMPDIR/crosstalk-opencode-<uid>; ours, mode 0700: a directory of
//    another user's gets no inbox; crosstalk checks the listener is this process by SO_PEERCRED). One JSON line in, one
//    JSON line out per connection:
//      {"op":"deliver","session":ID,"text":T,"as":"auto"|"steer"|"next_turn"|"meta"}
//        -> {"delivered":"immediate"|"queued"|"noted","status":"idle"|"busy"} or {"error":"..."}
//      {"op":"sessions"} -> {"sessions":[{"id","title","status","directory"}]}     {"op":"hello"} -> {"pid","version"}
//    A delivery is answered only once OpenCode wrote the message into the session (its `chat.message` hook ran for
//    it): idle -> a turn started with it ("immediate"); busy -> the running turn reads it at its next step
//    ("queued"); next_turn while busy -> kept here and prompted when the session goes idle ("queued");
//    meta -> written without a turn (noReply, "noted").
// OpenCode runs a plugin's function more than once per process: everything lives in one per-process state.
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

const VERSION = 1
const STATE = Symbol.for("crosstalk.opencode.state")
const SESSION_ARG = "opencode/session"
const TITLE_ARG = "opencode/title"
const TOOL_PREFIX = "crosstalk_"
const SEEN_TIMEOUT_MS = 10000
const MAX_LINE = 1024 * 1024

function socketDir(env) {
  if (env.CROSSTALK_OPENCODE_DIR) return env.CROSSTALK_OPENCODE_DIR
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, "crosstalk-opencode")
  return path.join(env.TMPDIR || "/tmp", `crosstalk-opencode-${process.getuid()}`)
}

function state() {
  let s = globalThis[STATE]
  if (!s) {
    s = globalThis[STATE] = { client: null, status: new Map(), titles: new Map(), waiters: new Set(),
                              later: new Map(), server: null, sock: null }
  }
  return s
}

function textOf(parts) {
  return (parts || []).filter((p) => p && p.type === "text").map((p) => p.text).join("")
}

function seen(s, session, text) {
  // resolves when OpenCode wrote a user message with exactly `text` into `session`; rejects after the timeout
  let w
  const p = new Promise((resolve, reject) => {
    w = { session, text, resolve, timer: setTimeout(() => { s.waiters.delete(w); reject(new Error("timeout")) }, SEEN_TIMEOUT_MS) }
    s.waiters.add(w)
  })
  return p
}

async function statusOf(s, session) {
  try {
    const r = await s.client.session.status()
    const data = r && r.data !== undefined ? r.data : r
    const st = data && data[session]
    if (st && st.type) return st.type === "idle" ? "idle" : "busy"
    return "idle"
  } catch {
    return s.status.get(session) || "idle"
  }
}

async function prompt(s, session, text, noReply) {
  const body = { parts: [{ type: "text", text }] }
  if (noReply) body.noReply = true
  const r = await s.client.session.promptAsync({ path: { id: session }, body })
  if (r && r.error) throw new Error(`promptAsync: ${JSON.stringify(r.error).slice(0, 200)}`)
}

async function deliver(s, m) {
  const session = String(m.session || "")
  const text = String(m.text || "")
  const as = String(m.as || "auto")
  if (!session || !text) return { error: "deliver needs a session and text" }
  // both asked at once: each is a round trip through OpenCode's own server
  const [got, status] = await Promise.all([
    s.client.session.get({ path: { id: session } }).catch((e) => ({ error: String(e) })),
    statusOf(s, session),
  ])
  if (!got || got.error || !got.data) return { error: `no session ${session} in this OpenCode process` }
  if (as === "next_turn" && status !== "idle") {
    const q = s.later.get(session) || []
    q.push(text)
    s.later.set(session, q)
    return { delivered: "queued", status, held: "next_turn" }
  }
  const written = seen(s, session, text)
  try {
    await prompt(s, session, text, as === "meta")
  } catch (e) {
    written.catch(() => {})
    return { error: String(e && e.message ? e.message : e) }
  }
  try {
    await written
  } catch {
    return { delivered: null, status, wait: "not written within the timeout" }
  }
  if (as === "meta") return { delivered: "noted", status }
  return { delivered: status === "idle" ? "immediate" : "queued", status }
}

async function flushLater(s, session) {
  const q = s.later.get(session)
  if (!q || !q.length) return
  s.later.delete(session)
  for (const text of q) await prompt(s, session, text, false).catch(() => {})
}

async function sessions(s) {
  const r = await s.client.session.list()
  const list = (r && r.data !== undefined ? r.data : r) || []
  const out = []
  for (const x of list) out.push({ id: x.id, title: x.title, directory: x.directory, status: await statusOf(s, x.id) })
  return { sessions: out }
}

async function answer(s, line) {
  let m
  try {
    m = JSON.parse(line)
  } catch {
    return { error: "not JSON" }
  }
  if (!m || typeof m !== "object") return { error: "not an object" }
  if (m.op === "hello") return { pid: process.pid, version: VERSION }
  if (m.op === "deliver") return deliver(s, m)
  if (m.op === "sessions") return sessions(s)
  return { error: `unknown op ${String(m.op).slice(0, 40)}` }
}

function listen(s) {
  if (s.server) return
  const dir = socketDir(process.env)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const st = fs.lstatSync(dir)
  if (!st.isDirectory() || st.uid !== process.getuid()) return // someone else's: no inbox (crosstalk says unreachable)
  if (st.mode & 0o077) fs.chmodSync(dir, 0o700)
  const sock = path.join(dir, `${process.pid}.sock`)
  try { fs.unlinkSync(sock) } catch {}
  s.sock = sock
  s.server = net.createServer((c) => {
    let buf = ""
    c.setEncoding("utf8")
    c.on("error", () => {})
    c.on("data", async (d) => {
      buf += d
      if (buf.length > MAX_LINE) return c.destroy()
      const nl = buf.indexOf("\n")
      if (nl < 0) return
      const line = buf.slice(0, nl)
      buf = ""
      let out
      try {
        out = await answer(s, line)
      } catch (e) {
        out = { error: String(e && e.message ? e.message : e).slice(0, 300) }
      }
      try { c.end(JSON.stringify(out) + "\n") } catch {}
    })
  })
  s.server.on("error", () => {})
  s.server.listen(sock, () => { try { fs.chmodSync(sock, 0o600) } catch {} })
  process.once("exit", () => { try { fs.unlinkSync(sock) } catch {} })
}

export const CrosstalkPlugin = async (ctx) => {
  const s = state()
  if (!s.client) s.client = ctx.client
  try {
    listen(s)
  } catch {} // no inbox (an unwritable directory): the tools still name their session; crosstalk says unreachable
  return {
    event: async ({ event }) => {
      const p = (event && event.properties) || {}
      if (event.type === "session.status" && p.sessionID) {
        const busy = p.status && p.status.type !== "idle"
        s.status.set(p.sessionID, busy ? "busy" : "idle")
        if (!busy) await flushLater(s, p.sessionID)
      } else if (event.type === "session.idle" && p.sessionID) {
        s.status.set(p.sessionID, "idle")
        await flushLater(s, p.sessionID)
      } else if ((event.type === "session.created" || event.type === "session.updated") && p.info && p.info.id) {
        s.titles.set(p.info.id, p.info.title)
      }
    },
    "chat.message": async (input, output) => {
      const text = textOf(output && output.parts)
      for (const w of [...s.waiters]) {
        if (w.session === input.sessionID && w.text === text) {
          s.waiters.delete(w)
          clearTimeout(w.timer)
          w.resolve()
        }
      }
    },
    "tool.execute.before": async (input, output) => {
      if (!input || typeof input.tool !== "string" || !input.tool.startsWith(TOOL_PREFIX)) return
      if (!output || !output.args || typeof output.args !== "object") return
      output.args[SESSION_ARG] = input.sessionID
      let title = s.titles.get(input.sessionID)
      if (title === undefined) {
        const got = await s.client.session.get({ path: { id: input.sessionID } }).catch(() => null)
        title = got && got.data ? got.data.title : undefined
        if (typeof title === "string") s.titles.set(input.sessionID, title)
      }
      if (typeof title === "string") output.args[TITLE_ARG] = title
      else delete output.args[TITLE_ARG]
    },
  }
}
