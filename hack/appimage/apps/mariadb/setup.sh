# The data directory is the claim the sample mounts; the entrypoint makes
# the system tables there on first start, so none are kept in the image.
rm -rf /var/lib/mysql/* /var/lib/mysql/.[!.]*
install -d -o mysql -g mysql /run/mysqld
