# The ngx_mruby seed benchmark in one file: a backend that answers in ~10 ms
# without blocking, and a front that reaches it in three ways. Under load
# (ab -k -c 100 -n 1000) the non-blocking route is ~100x faster than the
# blocking one: `rake bench:contrast` measures it.
#
#   build/gateway -f examples/async.rb
#   curl http://127.0.0.1:58080/async_http_sub_request_with_proxy_pass
#   curl http://127.0.0.1:58080/http_sub_request_with_proxy_pass
#   open http://127.0.0.1:58080/dashboard in a browser: watch the loop lag and
#   the parked fibers under load, and trace one request of each kind

# The backend, with its own worker: a blocking call from the front never waits
# on a worker it stalled itself.
server listen: 48080, workers: 1 do
  location "/mruby" do
    Nginx::Async.sleep 10   # milliseconds, as in ngx_mruby; the worker keeps serving
    Nginx.echo "done"
  end
end

server listen: 58080, workers: 1 do
  # Plain reverse proxy to the backend (the seed's output body filter, 'a = 1',
  # changes nothing: a filter's non-String result keeps the body).
  location "/sub_req_proxy_pass", proxy_pass: "http://127.0.0.1:48080/mruby",
                                  body_filter: ->(body, req) { a = 1 }

  # Non-blocking: the fiber parks while the sub-request is in flight.
  location "/async_http_sub_request_with_proxy_pass" do
    Nginx::Async::HTTP.sub_request "/sub_req_proxy_pass"
    res = Nginx::Async::HTTP.last_response
    Nginx.rputs res.body
  end

  # The live view (loopback clients only): stats over the last minutes and
  # one request's life as a waterfall, blocking vs non-blocking side by side.
  location "/dashboard", dashboard: true

  # Deliberately blocking: the whole worker waits ~10 ms per request.
  location "/http_sub_request_with_proxy_pass" do
    Nginx.rputs HttpRequest.new.get("http://127.0.0.1:48080/mruby")["body"]
  end
end
