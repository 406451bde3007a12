# Runs in the image's root filesystem (chroot) after its packages.
# jovyan (1000, group users=100) as in the Jupyter images; the home is
# the user's, the work folder the claim the sample mounts there.
useradd -u 1000 -g 100 -m -d /home/jovyan -s /bin/bash jovyan
install -d -o 1000 -g 100 /home/jovyan/work
