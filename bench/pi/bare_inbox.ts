/**
 * A bare pi extension for the pi benchmark's baseline: one unix socket ($BARE_INBOX_SOCK); each line written to
 * it becomes pi.sendUserMessage(line) (a follow-up while streaming). No queue, no crosstalk: the least an
 * extension does to put a message into its session.
 */
import * as fs from "node:fs";
import * as net from "node:net";
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	const path = process.env.BARE_INBOX_SOCK;
	let ctx: ExtensionContext | undefined;
	let server: net.Server | undefined;
	pi.on("session_start", async (_event, c) => {
		ctx = c;
		if (!path || server) return;
		try { fs.unlinkSync(path); } catch {}
		server = net.createServer((conn) => {
			let buf = "";
			conn.on("data", (chunk) => {
				buf += chunk.toString("utf8");
				let i: number;
				while ((i = buf.indexOf("\n")) >= 0) {
					const line = buf.slice(0, i);
					buf = buf.slice(i + 1);
					pi.sendUserMessage(line, ctx?.isIdle() ? undefined : { deliverAs: "followUp" });
					conn.write("ok\n");
				}
			});
			conn.on("error", () => {});
		});
		server.listen(path);
	});
	pi.on("session_shutdown", async () => {
		server?.close();
		if (path) try { fs.unlinkSync(path); } catch {}
	});
}
