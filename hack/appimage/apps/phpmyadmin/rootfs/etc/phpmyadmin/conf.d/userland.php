<?php
// The phpMyAdmin image's environment variables the sample sets: PMA_HOST
// (and PMA_PORT), the server to sign in to; PMA_ABSOLUTE_URI, the public
// address (the gateway's).
$cfg['Servers'][1]['auth_type'] = 'cookie';
$cfg['Servers'][1]['host'] = getenv('PMA_HOST') ?: 'localhost';
if (getenv('PMA_PORT')) {
    $cfg['Servers'][1]['port'] = getenv('PMA_PORT');
}
$cfg['Servers'][1]['AllowNoPassword'] = false;
if (getenv('PMA_ABSOLUTE_URI')) {
    $cfg['PmaAbsoluteUri'] = getenv('PMA_ABSOLUTE_URI');
}
$cfg['TempDir'] = '/var/lib/phpmyadmin/tmp';
