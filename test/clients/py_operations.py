"""Driver of test/clients-python.test.ts: every HTTP operation of nsm_client against the real server. Prints one
JSON report as its last line. Run with `python3 -S` too: the HTTP part must work without websockets."""
import hashlib
import json
import os
import sys

from nsm_client import (AuthenticationError, ConflictError, GoneError, InvalidRequestError, NotFoundError, NsmClient,
                        NsmError)

BASE, TOKEN, FIXTURE, OUT = os.environ["URL"], os.environ["TOKEN"], os.environ["FIXTURE"], os.environ["OUT"]
sha = lambda b: hashlib.sha256(b).hexdigest()
client = NsmClient(BASE, TOKEN)
report = {}


def caught(fn):
    try:
        fn()
        return None
    except NsmError as e:
        return {"class": type(e).__name__, "type": e.type, "status": e.status, "request_id": e.request_id, "message": e.message}


try:
    import websockets  # noqa: F401
    report["websockets"] = True
except ImportError:
    report["websockets"] = False

models = client.models()
report["models"] = {"default": models["default"], "ids": [m["id"] for m in models["models"]]}
report["sample"] = {"bytes": len(client.sample())}
report["health"] = {"status": client.health()["status"]}

audio = client.denoise(FIXTURE, model="nsm-1", output_format="flac", keep_input_sample_rate=False)
report["denoise"] = {"isBytes": isinstance(audio, bytes), "magic": audio[:4].decode("latin-1"), "filename": audio.filename,
                     "contentType": audio.content_type, "stats": audio.stats, "requestId": audio.request_id}
with open(FIXTURE, "rb") as f:
    data = f.read()
from_bytes = client.denoise(data, model="nsm-1")
named = client.denoise(("from-bytes.wav", data), model="nsm-1")
with open(FIXTURE, "rb") as f:
    from_file_object = client.denoise(f, model="nsm-1")
report["denoiseBytes"] = {"sha": sha(from_bytes), "filename": from_bytes.filename, "named": named.filename,
                          "fileObject": from_file_object.filename, "sameAudio": from_bytes == named == from_file_object}

z = client.denoise_batch([FIXTURE, ("second.wav", data)], model="nsm-1")
with open(os.path.join(OUT, "py-batch.zip"), "wb") as f:
    f.write(z)
report["batchZip"] = {"bytes": len(z), "summary": z.summary}
import base64
m = client.denoise_batch([FIXTURE, ("junk.wav", b"\x01\x02\x03")], model="nsm-1", response="json")
report["batchJson"] = {"succeeded": m["succeeded"], "failed": m["failed"], "statuses": [i["status"] for i in m["items"]],
                       "audioSha": sha(base64.b64decode(m["items"][0]["audio_base64"]))}

report["errors"] = {
    "badModel": caught(lambda: client.denoise(FIXTURE, model="nsm-9")),
    "badToken": caught(lambda: NsmClient(BASE, "mw_live_" + "x" * 32).models()),
    "noJob": caught(lambda: client.jobs.get("job_doesnotexist000000000000")),
}
report["hierarchy"] = [issubclass(c, NsmError) for c in (AuthenticationError, ConflictError, GoneError, InvalidRequestError, NotFoundError)]

progress = []
job = client.jobs.submit(FIXTURE, model="nsm-1")
final = client.jobs.wait(job["id"], interval=0.25, on_progress=lambda j: progress.append(j["status"]))
to = os.path.join(OUT, "py-job.wav")
dl = client.jobs.download(job["id"], to)
mem = client.jobs.download(job["id"])
page = client.jobs.list(limit=1)
every = [j["id"] for j in client.jobs.list_all(limit=1)]
deleted = client.jobs.cancel(job["id"])
with open(to, "rb") as f:
    file_sha = sha(f.read())
running = client.jobs.submit(url=os.environ["STALL_URL"], model="nsm-1")
canceled = client.jobs.cancel(running["id"])
report["jobs"] = {
    "submitted": {"id": job["id"], "status": job["status"]},
    "finished": {"status": final["status"], "bytes": final["result"]["bytes"]},
    "progress": progress,
    "download": {"bytes": dl.bytes, "resumes": dl.resumes, "filename": dl.filename, "fileSha": file_sha, "memorySha": sha(mem.data)},
    "list": {"count": len(page["jobs"]), "first": page["jobs"][0]["id"]},
    "listAll": every,
    "deleted": {"status": deleted["status"], "resultDeleted": deleted["result_deleted_at"] is not None},
    "afterDelete": caught(lambda: client.jobs.download(job["id"])),
    "cancel": {"status": canceled["status"], "source": running["input"]["source"]},
    "notFinished": caught(lambda: client.jobs.download(running["id"])),
}
# The echo reference option (the fixture as its own far end: every sample of it is echo).
echoed = client.denoise(FIXTURE, model="nsm-1", echo_reference=("far.wav", data))
echo_job = client.jobs.submit(FIXTURE, model="nsm-1", echo_reference=FIXTURE)
echo_done = client.jobs.wait(echo_job["id"], interval=0.25)
report["echo"] = {
    "denoise": {"reference": echoed.stats.get("echo_reference"), "active": echoed.stats.get("echo_reference_active"), "bytes": len(echoed)},
    "job": {"reference": echo_job["input"].get("echo_reference"), "status": echo_done["status"],
            "active": (echo_done.get("stats") or {}).get("echo_reference_active")},
}
ticket = client.streams.ticket()
report["ticket"] = {"prefix": ticket["ticket"][:3], "ttl_s": ticket["ttl_s"]}
print(json.dumps(report))
