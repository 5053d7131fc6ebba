"""Driver of test/e2e/clients-python.test.ts: a job result through a proxy that cuts the answer mid-body (URL is the
proxy, JOB_ID a succeeded job); nsm_client resumes with Range."""
import hashlib
import json
import os

from nsm_client import NsmClient

client = NsmClient(os.environ["URL"], os.environ["TOKEN"])
progress = []
to = client.jobs.download(os.environ["JOB_ID"], os.environ["OUT_FILE"], on_progress=lambda n, t: progress.append([n, t]))
mem = client.jobs.download(os.environ["JOB_ID"])
with open(os.environ["OUT_FILE"], "rb") as f:
    file_sha = hashlib.sha256(f.read()).hexdigest()
print(json.dumps({
    "file": {"bytes": to.bytes, "resumes": to.resumes, "sha": file_sha, "filename": to.filename},
    "memory": {"bytes": mem.bytes, "resumes": mem.resumes, "sha": hashlib.sha256(mem.data).hexdigest()},
    "lastProgress": progress[-1],
}))
