"""Cross-origin pages and DNS rebinding (issue 15, defect 5) on a live
server: a page of another origin may neither call /admin nor open /v1/ws,
a request addressed to a non-loopback name gets no token-less admin access,
and the server's own pages, curl and SDKs (no Origin header) are served as
before; --allowed-origins lets a named console origin in."""

import os

import pytest
import requests
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from conftest import LiveServer

if not os.environ.get("TROUPE_BIN"):
    pytest.skip("TROUPE_BIN is not set: end-to-end suites need a built troupe binary", allow_module_level=True)


def get_config(server, **headers):
    return requests.get(server.base_url + "/admin/config", headers=headers, timeout=30)


def test_admin_refuses_other_origins_and_rebound_names(server):
    host = server.base_url.split("://", 1)[1]
    assert get_config(server).status_code == 200, "curl-like clients send no Origin"
    assert get_config(server, Origin="http://" + host).status_code == 200, "the console's own origin"
    refused = get_config(server, Origin="http://evil.example")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "cross_origin"
    rebound = get_config(server, Host="evil.example:" + host.rsplit(":", 1)[1])
    assert rebound.status_code == 403
    assert rebound.json()["error"]["code"] == "admin_host_not_loopback"
    abort = requests.post(server.base_url + "/admin/requests/does-not-exist/abort",
                          headers={"Origin": "http://evil.example"}, timeout=30)
    assert abort.status_code == 403, "a form post from another site changes nothing"


def test_websocket_handshakes_from_other_origins_are_refused(server):
    url = server.base_url.replace("http://", "ws://") + "/v1/ws"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin="http://evil.example", open_timeout=30)
    assert refused.value.response.status_code == 403
    with connect(url, origin=server.base_url, open_timeout=30) as ws:
        ws.ping().wait(10)


def test_allowed_origins_let_a_named_console_in():
    live = LiveServer(["--allowed-origins", "https://console.example"])
    try:
        assert get_config(live, Origin="https://console.example").status_code == 200
        assert get_config(live, Origin="https://other.example").status_code == 403
        url = live.base_url.replace("http://", "ws://") + "/v1/ws"
        with connect(url, origin="https://console.example", open_timeout=30) as ws:
            ws.ping().wait(10)
    finally:
        live.stop()
