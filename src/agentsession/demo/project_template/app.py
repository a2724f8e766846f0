"""A tiny Flask service: the project the agentsession demo repairs.

It imports ``requests``, but requirements.txt lists only flask, so a fresh
environment fails at start-up with ``ModuleNotFoundError: No module named 'requests'``.
``python app.py --check`` boots the app, serves one request through Flask's test
client and exits 0 (or 1 if the request fails); without it the dev server starts.
"""

import sys

import requests
from flask import Flask

app = Flask(__name__)


@app.get("/health")
def health():
    """Report that the service is up, and which HTTP client it would call upstream with."""
    return {"status": "ok", "http_client": f"requests {requests.__version__}"}


if __name__ == "__main__":
    if "--check" in sys.argv:
        response = app.test_client().get("/health")
        print(f"GET /health -> {response.status_code} {response.get_json()}")
        sys.exit(0 if response.status_code == 200 else 1)
    app.run()
