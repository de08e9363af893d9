"""An OpenAI-compatible ``/v1/completions`` server of one local model, for
``bench/end_to_end.py``'s server route: what the harness's ``local-completions`` model talks
to (greedy only).

    python bench/completions_server.py MODEL_DIR [--device cpu]

prints the port it listens on, then serves until killed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DEVICE = os.environ.get("BAYEVAL_E2E_DEVICE", "cpu")


def serve(model_path: Path, port: int) -> None:
    """An OpenAI-compatible ``/v1/completions`` server of one model (what the harness's
    ``local-completions`` model talks to; greedy only): token-id or text prompts; with
    ``echo`` and ``logprobs`` it returns every prompt token's log-probability and the
    greedy token's (the harness's loglikelihood requests), else a greedy continuation of
    at most ``max_tokens`` tokens cut at the first ``stop`` string. Prints the port, then
    serves until killed."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(model_path))
    model = AutoModelForCausalLM.from_pretrained(str(model_path)).to(DEVICE).eval()
    lock = threading.Lock()  # one forward pass at a time on the model

    def ids_of(prompt) -> list[int]:
        return list(prompt) if isinstance(prompt, list) else tok(prompt)["input_ids"]

    def padded(rows: list[list[int]], left: bool) -> tuple:
        width = max(map(len, rows))
        pad = [[tok.pad_token_id] * (width - len(r)) for r in rows]
        ids = [p + r if left else r + p for r, p in zip(rows, pad, strict=True)]
        mask = [[0] * len(p) + [1] * len(r) if left else [1] * len(r) + [0] * len(p)
                for r, p in zip(rows, pad, strict=True)]
        return (torch.tensor(ids, device=DEVICE), torch.tensor(mask, device=DEVICE))

    def logprobs(rows: list[list[int]]) -> list[dict]:
        ids, mask = padded(rows, left=False)
        with lock, torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(),
                                     dim=-1)
        out = []
        for r, row in enumerate(rows):
            n = len(row)
            best = logp[r, :n].max(dim=-1)
            token_lp = [None] + [float(logp[r, i - 1, row[i]]) for i in range(1, n)]
            top = [None] + [{tok.convert_ids_to_tokens(int(best.indices[i - 1])):
                             float(best.values[i - 1])} for i in range(1, n)]
            token_lp.append(float(best.values[n - 1]))  # the one greedy token asked for
            top.append({tok.convert_ids_to_tokens(int(best.indices[n - 1])):
                        float(best.values[n - 1])})
            out.append({"token_logprobs": token_lp, "top_logprobs": top})
        return out

    def generate(rows: list[list[int]], max_tokens: int, stop: list[str]) -> list[str]:
        ids, mask = padded(rows, left=True)
        with lock, torch.no_grad():
            new = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                 max_new_tokens=max_tokens, pad_token_id=tok.pad_token_id,
                                 eos_token_id=None)[:, ids.shape[1]:]
        texts = []
        for row in new.tolist():  # as a server does: up to the end-of-text token
            end = row.index(tok.eos_token_id) if tok.eos_token_id in row else len(row)
            text = tok.decode(row[:end])
            cut = min((text.find(s) for s in stop if s and s in text), default=len(text))
            texts.append(text[:cut])
        return texts

    class Completions(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["prompt"]
            prompts = (prompt if isinstance(prompt, list) and prompt and not
                       isinstance(prompt[0], int) else [prompt])
            rows = [ids_of(p) for p in prompts]
            if body.get("echo") and body.get("logprobs"):
                choices = [{"index": i, "text": "", "logprobs": lp}
                           for i, lp in enumerate(logprobs(rows))]
            else:
                stop = body.get("stop") or []
                stop = [stop] if isinstance(stop, str) else list(stop)
                choices = [{"index": i, "text": t} for i, t in enumerate(
                    generate(rows, int(body.get("max_tokens", 16)), stop))]
            data = json.dumps({"choices": choices}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Completions)
    print(server.server_address[1], flush=True)
    server.serve_forever()


class Server:
    """``serve`` in a child process for the duration of a ``with`` block."""

    def __init__(self, model_path: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, str(model_path)],
                                     stdout=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise SystemExit("the completions server did not start")
        self.url = f"http://127.0.0.1:{int(line)}/v1/completions"

    def model_args(self, tokenizer: Path, concurrent: int) -> str:
        """The harness's ``local-completions`` arguments for this server (its batch size is
        the harness's ``--batch_size``)."""
        return (f"model=served,base_url={self.url},tokenizer_backend=huggingface,"
                f"tokenizer={tokenizer},tokenized_requests=True,"
                f"num_concurrent={concurrent},max_retries=1")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), 0)
