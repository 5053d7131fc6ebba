"""Driver of test/e2e/clients-python.test.ts: live streams with nsm_client (asyncio + websockets) against the real
server: paced, unpaced with a callback, the sync helper, a refused option, a mid-stream error, refusals typed; and
against a stand-in server, a stream that ends before `ready`."""
import asyncio
import hashlib
import json
import os
import time

from nsm_client import NsmClient, NsmError

BASE, TOKEN = os.environ["URL"], os.environ["TOKEN"]
with open(os.environ["PCM_FILE"], "rb") as f:
    pcm = f.read()
sha = lambda b: hashlib.sha256(b).hexdigest()
client = NsmClient(BASE, TOKEN)
report = {}


def err(e):
    return {"class": type(e).__name__, "type": e.type, "status": e.status, "closeCode": e.close_code,
            "request_id": e.request_id, "message": e.message}


async def main():
    # Paced 20 ms frames, odd write sizes, every message seen.
    types = []
    async with client.streams.open(model="nsm-1", sample_rate=16000, pace=20, on_message=lambda m: types.append(m["type"])) as s:
        t0 = time.monotonic()
        for off in range(0, len(pcm), 3333):
            await s.send(pcm[off:off + 3333])
        done = await s.end()
        report["paced"] = {"ready": {"model": s.ready["model"], "latency_ms": s.ready["latency_ms"]},
                           "elapsedS": time.monotonic() - t0, "types": types, "done": done["stats"],
                           "outBytes": len(s.output), "sha": sha(bytes(s.output)), "closeCode": s.close_code}
    # Unpaced, output to a callback.
    chunks = []
    async with client.streams.open(model="nsm-1", sample_rate=16000, on_audio=chunks.append) as s:
        await s.send(pcm)
        await s.end()
    report["callback"] = {"outBytes": sum(map(len, chunks)), "sha": sha(b"".join(chunks)), "messages": [m["type"] for m in s.messages]}
    # A ticket instead of the key (as a browser's backend would hand out).
    ticket = client.streams.ticket()["ticket"]
    keyless = NsmClient(BASE)
    async with keyless.streams.open(model="nsm-1", ticket=ticket) as s:
        report["ticket"] = s.ready["type"]
    # Options are forwarded: an option the server does not know (`turbo`) is refused by name.
    try:
        await client.streams.open(model="nsm-1", turbo=True)
    except NsmError as e:
        report["unknownOption"] = err(e)
    try:
        await NsmClient(BASE, "mw_live_" + "x" * 32).streams.open()
    except NsmError as e:
        report["badToken"] = err(e)
    # A mid-stream fault: a text message the protocol does not have → error message, close 1007.
    s = await client.streams.open(model="nsm-1")
    await s.send_json({"type": "bogus"})
    try:
        await s.end()
    except NsmError as e:
        report["midStream"] = err(e)
    # A stream that could not start: the server sends `error` in place of `ready` and closes (a stand-in server does,
    # on demand: the real one does so only when its live worker fails to start); a close before any message; junk.
    fake = NsmClient(os.environ["FAKE_URL"], TOKEN)
    report["beforeReady"] = {}
    for mode in ("error", "close", "junk"):
        try:
            await fake.streams.open(mode=mode)
            report["beforeReady"][mode] = "opened"
        except NsmError as e:
            report["beforeReady"][mode] = err(e)


asyncio.run(main())
out, done = client.streams.denoise_pcm(pcm, model="nsm-1", sample_rate=16000)
report["sync"] = {"outBytes": len(out), "sha": sha(out), "output_seconds": done["stats"]["output_seconds"]}
print(json.dumps(report))
