/* version.h - the gateway's version (gateway -v, and ngx_mruby's
 * Nginx.nginx_version / server_version, which answer with it). */
#ifndef GW_VERSION_H
#define GW_VERSION_H

#define GW_VERSION "0.1.0"

#endif
