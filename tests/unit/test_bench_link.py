"""bench/link.py, the benchmarks' wide-area link: its pacing as a pure function, and the relay
carrying bytes whole and in order through a shared, capped line (no timing thresholds: what is
checked is what the pacer scheduled)."""

from __future__ import annotations

import asyncio
import os

import pytest

from bench.link import CHUNK, Link, Pacer, delivery, start_links


def test_an_idle_direction_delivers_after_the_line_time_and_half_the_round_trip():
    assert delivery(10.0, 0.0, 1_250_000, 12_500_000, 0.01) == pytest.approx((10.11, 10.1))


def test_a_busy_direction_queues_the_chunk_behind_the_one_before():
    at, free_at = delivery(10.0, 10.5, 125_000, 12_500_000, 0.025)
    assert (at, free_at) == pytest.approx((10.535, 10.51))


def test_without_a_cap_only_the_delay_is_added():
    assert delivery(3.0, 2.0, 10**9, 0, 0.05) == (3.05, 3.0)


def test_a_pacer_counts_every_byte_and_the_line_time_they_took():
    pacer = Pacer(rate=1000.0, one_way=0.5)
    first = pacer.schedule(0.0, 500)   # the line busy until 0.5
    second = pacer.schedule(0.1, 250)  # waits for it: 0.5 + 0.25
    third = pacer.schedule(5.0, 100)   # idle again
    assert (first, second, third) == pytest.approx((1.0, 1.25, 5.6))
    assert pacer.carried == 850 and pacer.busy == pytest.approx(0.85)


def test_a_link_is_megabits_each_way_and_half_the_round_trip_each_way():
    link = Link(rtt=0.02, mbit=100)
    assert link.up.rate == link.down.rate == 12_500_000 and link.up.one_way == link.down.one_way == 0.01
    assert link.up is not link.down


def test_the_relay_carries_both_ways_whole_and_in_order_on_one_shared_line():
    async def scenario():
        async def echo(reader, writer):
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
            writer.write_eof()
            writer.close()

        target = await asyncio.start_server(echo, "127.0.0.1", 0)
        link = Link(rtt=0.002, mbit=4000)
        relay = await link.serve(target.sockets[0].getsockname()[:2], name="echo")
        port = relay.sockets[0].getsockname()[1]
        payloads = [os.urandom(700_000), os.urandom(300_001)]

        async def client(payload: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(payload)
            await writer.drain()
            writer.write_eof()
            back = await reader.read()
            writer.close()
            return back

        answers = await asyncio.gather(*(client(p) for p in payloads))
        relay.close()
        target.close()
        return link, payloads, answers

    link, payloads, answers = asyncio.run(scenario())
    assert answers == payloads
    total = sum(map(len, payloads))
    # both connections went through the link's two shared pacers, every byte at the rate
    assert link.up.carried == link.down.carried == total
    assert link.up.busy == pytest.approx(total / link.up.rate)
    assert link.down.busy == pytest.approx(total / link.down.rate)
    assert link.tally == {"echo": [total, total]}


def test_the_relay_process_names_a_port_per_link_and_route_and_relays():
    async def serve_once(ready: asyncio.Future):
        async def answer(reader, writer):
            writer.write(b"pong:" + await reader.read(4))
            await writer.drain()
            writer.close()
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        ready.set_result(server.sockets[0].getsockname()[1])
        return server

    async def scenario():
        ready = asyncio.get_running_loop().create_future()
        server = await serve_once(ready)
        links = await asyncio.to_thread(start_links, {"a": ("127.0.0.1", await ready), "b": ("127.0.0.1", await ready)},
                                        rtt=0.001, mbit=0, links=2)
        try:
            assert [sorted(p) for p in links.ports] == [["a", "b"], ["a", "b"]]
            assert len({p for ports in links.ports for p in ports.values()}) == 4
            reader, writer = await asyncio.open_connection("127.0.0.1", links.ports[1]["b"])
            writer.write(b"ping")
            await writer.drain()
            got = await reader.read()
            writer.close()
        finally:
            await asyncio.to_thread(links.stop)
            server.close()
        return got, links.process.returncode, links.tally

    got, code, tally = asyncio.run(scenario())
    assert got == b"pong:ping" and code == 0
    # what each link carried per route, up and down: only link 1's route b was used
    assert tally == [{"a": [0, 0], "b": [0, 0]}, {"a": [0, 0], "b": [4, 9]}]
