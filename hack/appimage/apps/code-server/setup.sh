# coder (1000:1000) as in code-server's image; its home is the claim the
# sample mounts there.
groupadd -g 1000 coder
useradd -u 1000 -g 1000 -m -d /home/coder -s /bin/bash coder
