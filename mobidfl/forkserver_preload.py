"""The fork server's first preload module: it ends with the command that started it.

Imported only in multiprocessing's fork server (``mobidfl.analysis.executors.worker_context``
lists it first in ``set_forkserver_preload``, before torch, so a command killed while the
server still imports torch takes the server with it). Importing it elsewhere would tie that process
to its parent: nothing else imports it.
"""

from mobidfl.lifetime import die_with_parent

die_with_parent()
