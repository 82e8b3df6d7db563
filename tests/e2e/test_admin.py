"""The operator's console on a live server: the page, live settings that
change without a restart and take effect, and refused changes."""

from concurrent.futures import ThreadPoolExecutor

import requests


def settings(server):
    response = requests.get(server.base_url + "/admin/config", timeout=10)
    response.raise_for_status()
    return response.json()["settings"]


def test_the_console_page_is_served(server):
    page = requests.get(server.base_url + "/admin", timeout=10)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "/admin/config" in page.text


def test_live_settings_change_without_a_restart(server):
    original = settings(server)
    try:
        changed = requests.patch(server.base_url + "/admin/config",
                                 json={"policy": "priority", "max_num_seqs": 2, "max_num_batched_tokens": 64},
                                 timeout=10)
        assert changed.status_code == 200, changed.text
        now = settings(server)
        assert (now["policy"], now["max_num_seqs"], now["max_num_batched_tokens"]) == ("priority", 2, 64)

        def complete(i):
            body = {"prompt": f"request {i} " + "word " * 100, "max_tokens": 4, "ignore_eos": True}
            return requests.post(server.base_url + "/v1/completions", json=body, timeout=120)

        with ThreadPoolExecutor(6) as pool:  # more requests than running slots, prompts over the budget
            responses = list(pool.map(complete, range(6)))
        assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
        assert all(r.json()["usage"]["completion_tokens"] == 4 for r in responses)
    finally:
        requests.patch(server.base_url + "/admin/config", json=original, timeout=10).raise_for_status()
    assert settings(server) == original


def test_bad_changes_are_refused_by_field(server):
    before = settings(server)
    for body, field in [({"policy": "lifo"}, "policy"), ({"max_num_seqs": 0}, "max_num_seqs"),
                        ({"block_size": 32}, "block_size"), ({"max_num_seqs": "ten"}, "max_num_seqs"),
                        ({"mlfq_quantum": 0}, "mlfq_quantum")]:
        response = requests.patch(server.base_url + "/admin/config", json=body, timeout=10)
        assert response.status_code == 400, body
        assert response.json()["error"]["param"] == field
    assert settings(server) == before


def test_the_mlfq_quantum_is_a_live_knob(server):
    original = settings(server)
    try:
        changed = requests.patch(server.base_url + "/admin/config", json={"policy": "mlfq", "mlfq_quantum": 2},
                                 timeout=10)
        assert changed.status_code == 200, changed.text
        assert (settings(server)["policy"], settings(server)["mlfq_quantum"]) == ("mlfq", 2)
        body = {"prompt": "a short quantum", "max_tokens": 6, "ignore_eos": True}
        response = requests.post(server.base_url + "/v1/completions", json=body, timeout=120)
        assert response.status_code == 200, response.text
        assert response.json()["usage"]["completion_tokens"] == 6
    finally:
        requests.patch(server.base_url + "/admin/config", json=original, timeout=10).raise_for_status()
    assert settings(server) == original
