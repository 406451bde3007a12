# The secret Debian's postinst made is per image; the entrypoint makes one
# per start instead.
rm -f /var/lib/phpmyadmin/blowfish_secret.inc.php
install -d -o www-data -g www-data /var/lib/phpmyadmin/tmp
