# SPDX-License-Identifier: Apache-2.0
"""`await handle`: one notifier per event loop (an eventfd the loop watches with add_reader);
the operation's completion queues its handle there from whatever thread completes it, and the
loop resolves the awaiting future. No thread per handle, no polling."""
import asyncio
import weakref

from . import _tierflow

_notifiers = weakref.WeakKeyDictionary()


def _notifier(loop):
    n = _notifiers.get(loop)
    if n is None:
        n = _tierflow._Notifier()
        loop.add_reader(n.fd, n.dispatch)
        _notifiers[loop] = n
    return n


def await_handle(handle):
    """The generator behind Handle.__await__: the Completion, or the operation's error."""
    if not handle.done():
        loop = asyncio.get_running_loop()
        future = handle._notify(_notifier(loop), loop.create_future())
        if future is not None:  # shared by every coroutine that awaits this handle
            yield from future.__await__()
    return handle.wait()


async def reap(pipe, most=64):
    """The pipe's next completions (see Pipe.reap), waiting for its descriptor to be readable in
    the running loop rather than polling: Pipe.reap_async."""
    got = pipe.reap(most)
    while not got:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.add_reader(pipe.fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            loop.remove_reader(pipe.fd)
        got = pipe.reap(most)
    return got
